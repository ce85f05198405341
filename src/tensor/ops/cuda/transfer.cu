// Moving bytes between the CPU and a GPU, or between GPUs: cudaMemcpyAsync on the GPU's
// current stream (the destination's for host-to-device and device-to-device copies, the
// source's for device-to-host), so the copy runs after the kernels that produced the data and
// before those that consume it. When the copy reads or writes host memory the host then waits
// for the stream, unless the caller asked for a non-blocking copy; a copy between GPUs is
// ordered by the streams alone.
//
// Pinned versus pageable host memory: the GPU's copy engines can only read and write pinned
// (page-locked) memory. A copy from pageable memory is first staged by the driver through a
// pinned buffer, which costs bandwidth and forces the host to wait; a copy from pinned memory
// is a single DMA transfer that the host does not have to wait for.
#include "core/cuda/block_use.cuh"
#include "tensor/ops/cuda/launch.cuh"
#include "tensor/ops/dispatch/copy_kernels.h"

namespace lockstep::cuda {

void copy_between_devices(const Tensor& src, const Tensor& dst, bool non_blocking) {
  LOCKSTEP_CHECK(src.is_contiguous() && dst.is_contiguous() && src.dtype() == dst.dtype() && src.numel() == dst.numel(),
                 "copy_between_devices: expected two contiguous tensors of one dtype and size, got ",
                 shape_str(src.shape()), " ", dtype_name(src.dtype()), " and ", shape_str(dst.shape()), " ",
                 dtype_name(dst.dtype()));
  const size_t nbytes = static_cast<size_t>(src.numel()) * element_size(src.dtype());
  if (nbytes == 0) return;
  // The GPU whose stream orders the copy: the destination's, unless the destination is the CPU.
  const Device gpu = dst.device().is_cuda() ? dst.device() : src.device();
  DeviceGuard guard(gpu);
  const cudaStream_t stream = stream_for(gpu);
  const bool between_gpus = src.device().is_cuda() && dst.device().is_cuda() && src.device() != dst.device();
  // Between two GPUs the destination's stream must also wait for the source's pending work.
  if (between_gpus) stream_wait(src.device(), stream, stream_for(src.device()));
  LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), nbytes, cudaMemcpyDefault, stream));
  // ...and the source's stream must wait for the copy: memory allocated there goes back to that
  // stream's free list once the caller drops it (a temporary made contiguous for the copy,
  // say), and the next kernel queued there must not overwrite it mid-copy. (A DataParallel
  // replica's output comes from a side stream of the source GPU; it is safe because
  // parallel_apply makes that stream and the main one wait for each other.)
  if (between_gpus) stream_wait(gpu, stream_for(src.device()), stream);
  // A pinned buffer may be freed while the copy is still queued: tell its allocator to wait.
  if (src.is_pinned()) record_pinned_use(src.storage()->data(), stream);
  if (dst.is_pinned()) record_pinned_use(dst.storage()->data(), stream);
  // A device-to-host copy into pageable memory must be complete before the host reads it, and
  // so must a copy to or from host memory that the caller wants finished. A copy between GPUs
  // touches no host memory: every later reader of either side is queued behind it, so the
  // host need not wait (DataParallel's backward sends every parameter's gradient this way).
  const bool host_memory = src.device().is_cpu() || dst.device().is_cpu();
  const bool host_reads_now = dst.device().is_cpu() && !dst.is_pinned();
  if (host_reads_now || (host_memory && !non_blocking)) LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace lockstep::cuda
