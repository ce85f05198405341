/// \file
/// Work: the handle of a collective that was started and may still be running (PyTorch c10d's
/// Work). A process group returns one from every `_async` collective; its watchdog holds one
/// for each collective it watches.
#pragma once

namespace lockstep {

/// The handle of a collective that was started and may not have finished (torch's Work).
/// Every started collective must be waited for: until then the tensors it was given may still be
/// read or written by the backend, and must stay alive and untouched. (A Work dropped unwaited
/// keeps its tensors' memory safe all the same: with NCCL, the streams that may reuse that
/// memory wait for the collective, so they stall with it if a rank never joins.)
///
/// \see @ref chapter4 "Chapter 4: DistributedDataParallel", which introduces it.
class Work {
 public:
  virtual ~Work() = default;
  /// Blocks until the collective has finished and its result can be used by the caller: on the
  /// CPU its tensors hold the result; on a GPU, work queued afterwards on the current stream runs
  /// after it (the CPU need not wait). Rethrows the backend's error, if any. Waiting twice is
  /// harmless.
  virtual void wait() = 0;
  /// Whether the backend has finished the collective, without blocking. Call wait() all the same
  /// before using the result: for GPU tensors it is wait() that orders later work after the
  /// collective, and the MPI backend copies a GPU tensor's result back only then.
  virtual bool is_completed() = 0;
};

}  // namespace lockstep
