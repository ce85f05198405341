/// \file
/// CUDA graphs, as PyTorch's `torch.cuda.CUDAGraph`: the GPU work that a stretch of host code
/// queues (kernels, copies between GPU tensors, cuBLAS calls), recorded once and then replayed
/// with a single launch. A small model's training step is a few hundred kernel launches that
/// each cost the CPU microseconds to queue, often more than the GPU needs to run them; a replay
/// queues the whole step at once.
///
/// A replay repeats the recorded kernels on the recorded addresses and nothing else, so the
/// recorded code must not need:
/// - other shapes or tensors: inputs are copied into tensors kept for the graph (static inputs)
///   before each replay, and outputs are read from the tensors the capture returned;
/// - host work: what the host did during the capture (a branch, the flop count, the trace) does
///   not run again; the graph adds its recorded flops to the count at each replay;
/// - waiting: a copy to the host, item() or a synchronisation cannot be recorded, and the
///   capture fails with CUDA's error naming the call.
/// - state made on first use: work that creates something the first time it runs (cuBLAS's
///   handle for a stream, an optimiser's buffers) must run once before the capture, as
///   PyTorch's recipe warms up before `torch.cuda.graph`.
/// The blocks allocated during the capture come from the graph's own pool of the caching
/// allocator and stay reserved for its replays until reset() (core/cuda/graph_pool.cuh).
#pragma once

#include <cstdint>
#include <functional>

#include "core/cuda/api.h"
#include "core/device.h"

namespace lockstep::cuda {

/// One recorded stretch of GPU work on one device, replayed at will.
class CUDAGraph {
 public:
  CUDAGraph() = default;
  ~CUDAGraph() {
    if (pool_ != 0) destroy();
  }
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  /// Runs `work`, recording the GPU work it queues on `device`'s current stream instead of
  /// running it: nothing executes until replay(). Work queued before is waited for first. If
  /// `work` throws, or queues something a graph cannot record, the capture is dropped and the
  /// error names it. A graph holds one capture: reset() it to capture again.
  LOCKSTEP_CUDA_FN(void capture(Device device, const std::function<void()>& work))
  /// Queues the recorded work once, on the stream it was captured on.
  LOCKSTEP_CUDA_FN(void replay())
  /// Drops the recording (after waiting for replays still queued) and hands its memory back to
  /// the allocator's shared cache. Tensors the capture returned stay valid as ordinary tensors.
  LOCKSTEP_CUDA_FN(void reset())
  /// Whether a capture is held, ready to replay.
  bool captured() const { return exec_ != nullptr; }
  /// The flops (core/flop_count.h) the captured work counted, added to the count by each replay.
  int64_t flops_per_replay() const { return flops_; }

 private:
  // reset() for the destructor, which must not throw: an error is reported and the rest freed.
  LOCKSTEP_CUDA_FN(void destroy() noexcept)

  Device device_ = Device::cpu();
  [[maybe_unused]] void* stream_ = nullptr;  // cudaStream_t captured on and replayed on (unused without CUDA)
  void* exec_ = nullptr;    // cudaGraphExec_t: the instantiated recording
  int64_t pool_ = 0;        // its pool in the caching allocator; 0 when nothing is held
  int64_t flops_ = 0;
};

}  // namespace lockstep::cuda
