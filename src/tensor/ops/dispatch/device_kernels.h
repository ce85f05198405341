/// \file
/// The one place where an op's work goes to the CPU or to a GPU.
///
/// Every kernel exists twice with one signature, `cpu::name_kernel` (tensor/ops/cpu/) and
/// `cuda::name_kernel` (tensor/ops/cuda/). One header per op family in this folder declares
/// both and pairs them up as a DeviceKernels, `kernels::name = device_kernels(cpu::name_kernel,
/// cuda::name_kernel)`, and an op calls `kernels::name.call(device, args...)`. call() picks the
/// backend by the tensors' device and, for a GPU, makes that device current for the kernel's
/// duration; the CUDA kernel queues its work on the device's current stream
/// (`stream_for(device)`, core/cuda/device_guard.cuh). A new backend is one more member here
/// and one more entry per pair; the ops do not change. (PyTorch's DispatchStub plays this part.)
///
/// The element type is chosen inside each kernel, by core/dispatch.h (dispatch_floating and
/// friends), which lists the dtypes once for both backends.
#pragma once

#include <utility>

#include "core/cuda/device_guard.h"
#include "core/device.h"

namespace lockstep {

/// An op's CPU and CUDA kernel, which share the signature `Signature`.
template <class Signature>
struct DeviceKernels;

/// An op's CPU and CUDA kernel, which share the signature `R(Params...)`.
template <class R, class... Params>
struct DeviceKernels<R(Params...)> {
  R (*cpu)(Params...);   ///< The kernel for tensors on the CPU.
  R (*cuda)(Params...);  ///< The kernel for tensors on a CUDA device.

  /// Runs the kernel of `device`, where the tensors in `args` live; on a GPU with `device`
  /// current, so that the kernel and any memory it allocates belong to it.
  template <class... Args>
  R call(Device device, Args&&... args) const {
    if (device.is_cuda()) {
      const cuda::DeviceGuard guard(device);
      return cuda(std::forward<Args>(args)...);
    }
    return cpu(std::forward<Args>(args)...);
  }
};

/// Pairs an op's CPU and CUDA kernel. Both must have one signature: the compiler deduces it from
/// `cpu` and refuses a `cuda` that differs, so the pair is checked where it is written.
template <class R, class... Params>
constexpr DeviceKernels<R(Params...)> device_kernels(R (*cpu)(Params...), R (*cuda)(Params...)) {
  return {cpu, cuda};
}

}  // namespace lockstep
