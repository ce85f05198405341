/// \file
/// The CUDA runtime state Lockstep keeps per device: the streams kernels are queued on, and
/// waiting for them. Lockstep's work on `cuda:N` goes to one stream per device (created on first
/// use), so kernels, copies and cuBLAS calls run in the order they were issued and the CPU only
/// waits where a value is needed on the host (item(), copies to the CPU). A thread may make
/// another stream current: DataParallel's replicas sharing a GPU use side streams, and chapter
/// 4's NCCL backend communicates on a stream of its own; events order them against the main one.
#pragma once

#include <string>

#include "core/cuda/api.h"
#include "core/device.h"

namespace lockstep::cuda {

/// A CUDA stream (a cudaStream_t inside `.cu` files), opaque to code that does not include CUDA.
using StreamHandle = void*;

/// Makes `device` the calling thread's current CUDA device, as PyTorch's
/// `torch.cuda.set_device`. Every op switches to its tensors' GPU and back by itself (the
/// dispatch point's DeviceGuard), so this is about what "back" means: a thread starts on
/// cuda:0, and CUDA gives a GPU a context (hundreds of MiB of its memory) as soon as a thread
/// makes it current. A process that works on one GPU other than cuda:0, like chapter 4's rank 1
/// on cuda:1, calls this once before its first CUDA work, so that cuda:0 is never touched.
LOCKSTEP_CUDA_FN(void set_device(Device device))
/// The calling thread's current CUDA device: cuda:0 until set_device (PyTorch's
/// `torch.cuda.current_device`).
LOCKSTEP_CUDA_FN(Device current_device())
/// The stream the calling thread queues Lockstep's work on `device` on: the one it made current
/// with set_current_stream, else Lockstep's own stream of the device (created on first use).
LOCKSTEP_CUDA_FN(StreamHandle current_stream(Device device))
/// Makes `stream` the current stream of `device` for the calling thread only (nullptr restores
/// Lockstep's own stream); other threads keep theirs. The caching allocator and cuBLAS keep
/// memory and a handle per stream for the rest of the run, so a stream made current must never
/// be destroyed.
LOCKSTEP_CUDA_FN(void set_current_stream(Device device, StreamHandle stream))
/// A further stream of `device`, number `index` (0, 1, ...), created on first use and kept for
/// the whole run: DataParallel's replicas that share one GPU queue their work on one each, so
/// that the GPU may overlap them.
LOCKSTEP_CUDA_FN(StreamHandle side_stream(Device device, int index))
/// Orders two streams without blocking the CPU: work queued on `waiting` from now on starts only
/// after everything queued on `done`, a stream of `device`, so far has finished (an event
/// recorded on `done`, waited for by `waiting`, which may be a stream of another GPU).
LOCKSTEP_CUDA_FN(void stream_wait(Device device, StreamHandle waiting, StreamHandle done))
/// Blocks the calling CPU thread until all work queued on `device`'s current stream is done,
/// and reports any error a kernel raised meanwhile.
LOCKSTEP_CUDA_FN(void synchronize(Device device))
/// The GPU's name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3".
LOCKSTEP_CUDA_FN(std::string device_name(Device device))
/// The GPU's compute capability as major * 10 + minor, e.g. 90 for an H100 (sm_90), 75 for a
/// T4 (`torch.cuda.get_device_capability`). bf16 tensor cores need 80 (Ampere) or more.
LOCKSTEP_CUDA_FN(int compute_capability(Device device))

}  // namespace lockstep::cuda
