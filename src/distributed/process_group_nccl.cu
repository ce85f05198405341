// The NCCL backend of ProcessGroup (declared in distributed/process_group_nccl.h).
//
// NCCL's collectives are GPU kernels: calling one only queues it on a stream, and the CPU goes
// on at once. Each group owns a communication stream of its own, so that gradients can be
// all-reduced while the compute stream runs the rest of backward. The two streams are ordered
// with CUDA events, never by making the CPU wait:
//   - a collective first waits (on the GPU) for what the caller's current stream has queued, so
//     it reads the values the caller computed;
//   - Work::wait() makes the caller's current stream wait for the collective, so later kernels
//     see its result.
// Only the barrier blocks the CPU, since a barrier is about the progress of the host programs.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "core/cuda/block_use.cuh"
#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "distributed/nccl_check.cuh"
#include "distributed/process_group_mpi.h"
#include "distributed/process_group_nccl.h"
#include "util/trace.h"

namespace lockstep {

using cuda::DeviceGuard;
using cuda::stream_for;

namespace {

ncclDataType_t nccl_datatype(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::u8: return ncclUint8;
    default:
      LOCKSTEP_FAIL("the NCCL backend cannot send ", dtype_name(dtype),
                    " tensors (it handles f32, f64, f16, bf16, i64, i32 and u8; convert bool with ",
                    ".to(DType::u8))");
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  throw Error("the NCCL backend got an unknown ReduceOp");
}

// One collective queued on the communication stream: the events that order it against the
// caller's streams, and the tensors it reads and writes, kept alive until the Work is destroyed.
class NcclWork : public Work {
 public:
  NcclWork(Device device, std::vector<Tensor> tensors, bool blocks_host)
      : device_(device), tensors_(std::move(tensors)), blocks_host_(blocks_host) {
    DeviceGuard guard(device_);
    // Timing is not needed, and events without it are cheaper to record and wait for.
    LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }

  ~NcclWork() override {
    // The tensors go back to the caching allocator right after this, each block to the free
    // list of the stream it was allocated on. If nobody waited, or the wait was on another
    // stream, NCCL may still be reading or writing them: that stream must not run the memory's
    // next user before the collective is done. (PyTorch's NCCL backend marks such memory with
    // record_stream; after a wait on that same stream this costs nothing.)
    cuda::detail::release_quietly("ordering freed memory after an NCCL collective", [this] {
      DeviceGuard guard(device_);
      for (const Tensor& t : tensors_) {
        const cudaStream_t stream = cuda::allocation_stream(device_, t.storage()->data());
        if (stream != nullptr) LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0));
      }
    });
    cuda::detail::release_quietly("destroying an NCCL collective's events", [this] {
      DeviceGuard guard(device_);
      LOCKSTEP_CUDA_CHECK(cudaEventDestroy(ready_));
      LOCKSTEP_CUDA_CHECK(cudaEventDestroy(done_));
    });
  }

  cudaEvent_t ready() const { return ready_; }
  cudaEvent_t done() const { return done_; }

  void wait() override {
    DeviceGuard guard(device_);
    // A barrier promises that every rank got this far, which only the CPU waiting can show.
    if (blocks_host_) {
      LOCKSTEP_CUDA_CHECK(cudaEventSynchronize(done_));
      return;
    }
    // The stream current now (which may not be the one current when the collective started)
    // runs its later work after the collective; the CPU goes on.
    LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream_for(device_), done_, 0));
  }

  bool is_completed() override { return cuda::event_completed(done_); }

 private:
  Device device_;
  std::vector<Tensor> tensors_;
  bool blocks_host_;
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t done_ = nullptr;
};

class ProcessGroupNCCL : public ProcessGroup {
 public:
  ProcessGroupNCCL(int rank, int size, Device device, ncclComm_t comm, cudaStream_t stream,
                   const ProcessGroupOptions& options)
      : ProcessGroup(rank, size, options), device_(device), comm_(comm), stream_(stream) {
    // PyTorch's NCCL watchdog: the collectives' events are polled for the deadline, and the
    // communicator for errors NCCL finds on its own (a peer gone, a network failure); on either,
    // the communicator is aborted, so no kernel waits forever, before the job ends.
    WatchdogHooks hooks = mpi_watchdog_hooks();
    hooks.async_error = [this]() -> std::string {
      ncclResult_t result = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) return "ncclCommGetAsyncError failed";
      if (result == ncclSuccess || result == ncclInProgress) return "";
      return detail::concat("NCCL reports an asynchronous error on ", device_.str(), ": ", ncclGetErrorString(result),
                            " (", ncclGetLastError(comm_), ")");
    };
    hooks.abort_communicator = [this] { ncclCommAbort(comm_); };
    start_watchdog(std::move(hooks));
  }

  ~ProcessGroupNCCL() override {
    // The watchdog polls the communicator: it stops before the communicator is destroyed.
    stop_watchdog();
    cuda::detail::release_quietly("destroying the NCCL group", [this] {
      DeviceGuard guard(device_);
      // Collectives still queued use the communicator and the stream: let them finish first.
      LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream_));
      LOCKSTEP_NCCL_CHECK(ncclCommDestroy(comm_));
      LOCKSTEP_CUDA_CHECK(cudaStreamDestroy(stream_));
    });
  }

  std::string backend_name() const override { return "nccl"; }
  Device message_device() const override { return device_; }

 protected:
  std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) override {
    check_device("all_reduce", tensor);
    const ncclDataType_t type = nccl_datatype(tensor.dtype());
    return launch("all_reduce", tensor.nbytes(), {tensor}, /*blocks_host=*/false, tensor.numel(), [&] {
      LOCKSTEP_NCCL_CHECK(
          ncclAllReduce(tensor.data(), tensor.data(), tensor.numel(), type, nccl_op(op), comm_, stream_));
    });
  }

  std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) override {
    check_device("broadcast", tensor);
    const ncclDataType_t type = nccl_datatype(tensor.dtype());
    return launch("broadcast", tensor.nbytes(), {tensor}, /*blocks_host=*/false, tensor.numel(), [&] {
      LOCKSTEP_NCCL_CHECK(ncclBroadcast(tensor.data(), tensor.data(), tensor.numel(), type, root, comm_, stream_));
    });
  }

  std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) override {
    check_device("all_gather", input);
    const ncclDataType_t type = nccl_datatype(input.dtype());
    return launch("all_gather", output.nbytes(), {output, input}, /*blocks_host=*/false, input.numel(), [&] {
      LOCKSTEP_NCCL_CHECK(ncclAllGather(input.data(), output.data(), input.numel(), type, comm_, stream_));
    });
  }

  std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override {
    check_device("reduce_scatter", input);
    const ncclDataType_t type = nccl_datatype(input.dtype());
    return launch("reduce_scatter", input.nbytes(), {output, input}, /*blocks_host=*/false, output.numel(), [&] {
      LOCKSTEP_NCCL_CHECK(
          ncclReduceScatter(input.data(), output.data(), output.numel(), type, nccl_op(op), comm_, stream_));
    });
  }

  // NCCL has no barrier: an all-reduce of one number finishes only once every rank has joined.
  std::shared_ptr<Work> start_barrier() override {
    if (!barrier_tensor_.defined()) barrier_tensor_ = zeros({1}, TensorOptions().device(device_));
    const Tensor& flag = barrier_tensor_;
    return launch("barrier", 0, {flag}, /*blocks_host=*/true, 1, [&] {
      LOCKSTEP_NCCL_CHECK(ncclAllReduce(flag.data(), flag.data(), 1, ncclFloat32, ncclSum, comm_, stream_));
    });
  }

 private:
  // NCCL reads and writes GPU memory of its own device only.
  void check_device(const char* collective, const Tensor& t) const {
    LOCKSTEP_CHECK(t.device() == device_, collective, ": the NCCL group of this rank uses ", device_.str(),
                   ", got a tensor on ", t.device().str(),
                   " (the NCCL backend handles CUDA tensors only; use the MPI backend for CPU tensors)");
  }

  // Queues `collective` on the communication stream, after the caller's queued work, and
  // returns the Work that orders later work after it. A collective of no elements moves
  // nothing (on every rank alike), so only the ordering is queued. On a trace, its span marks
  // when the CPU queued it, named by `what` and `bytes` as the MPI backend names its spans,
  // plus "queued" ("all_reduce 879 KiB queued"): the GPU runs it later.
  template <class Collective>
  std::shared_ptr<Work> launch(const char* what, int64_t bytes, std::vector<Tensor> tensors, bool blocks_host,
                               int64_t count, const Collective& collective) {
    const RecordFunction span([&] { return detail::concat(what, " ", bytes_str(bytes), " queued"); }, "comm");
    DeviceGuard guard(device_);
    auto work = std::make_shared<NcclWork>(device_, std::move(tensors), blocks_host);
    // The GPU, not the CPU, waits for the caller's kernels: the CPU goes on queueing backward.
    LOCKSTEP_CUDA_CHECK(cudaEventRecord(work->ready(), stream_for(device_)));
    LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream_, work->ready(), 0));
    if (count > 0) collective();
    LOCKSTEP_CUDA_CHECK(cudaEventRecord(work->done(), stream_));
    return work;
  }

  Device device_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  Tensor barrier_tensor_;  // the barrier's one number, allocated on first use
};

}  // namespace

bool built_with_nccl() { return true; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<ProcessGroup>& bootstrap, Device device,
                                                      const ProcessGroupOptions& options) {
  LOCKSTEP_CHECK(bootstrap != nullptr, "make_nccl_process_group: expected a bootstrap group (an MPI group), got null");
  LOCKSTEP_CHECK_KIND(device.is_cuda(), ErrorKind::NcclNeedsCuda, "the NCCL backend needs a CUDA device, got ",
                      device.str(), "; use a GPU, or the MPI backend");
  LOCKSTEP_CHECK(device.index() >= 0 && device.index() < cuda_device_count(), "the NCCL backend cannot use ",
                 device.str(), ": this machine has ", cuda_device_count(), " CUDA device(s)");
  const int rank = bootstrap->rank();
  const int size = bootstrap->size();

  // Every rank must present the same id to join one communicator: rank 0 makes it, and the
  // bootstrap group (which already connects the ranks) sends its bytes to the others.
  ncclUniqueId id;
  Tensor id_bytes = empty({static_cast<int64_t>(sizeof(id))}, TensorOptions().dtype(DType::u8));
  if (rank == 0) {
    LOCKSTEP_NCCL_CHECK(ncclGetUniqueId(&id));
    std::memcpy(id_bytes.data_ptr<uint8_t>(), &id, sizeof(id));
  }
  bootstrap->broadcast(id_bytes, 0);
  std::memcpy(&id, id_bytes.data_ptr<uint8_t>(), sizeof(id));

  // The communicator belongs to the device current while it is created, and so does the stream.
  DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  try {
    LOCKSTEP_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  } catch (const Error& e) {
    // The usual cause: more ranks on a node than GPUs, so two of them picked the same one.
    throw Error(ErrorKind::NcclNeedsOneGpuPerRank,
                detail::concat("NCCL: rank ", rank, " could not join the communicator on ", device.str(), " (",
                               e.what(), "); NCCL needs one GPU per rank: two ranks of a node sharing a GPU are ",
                               "refused (\"Duplicate GPU detected\"). Use the MPI backend, or start fewer ranks"));
  }
  // Non-blocking: the communication stream must not wait on the legacy default stream.
  cudaStream_t stream = nullptr;
  try {
    LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  } catch (...) {
    cuda::detail::release_quietly("destroying the NCCL communicator",
                                  [comm] { LOCKSTEP_NCCL_CHECK(ncclCommDestroy(comm)); });
    throw;
  }
  try {
    return std::make_shared<ProcessGroupNCCL>(rank, size, device, comm, stream, options);
  } catch (...) {
    // The group's own checks failed (ranks with different settings): nothing else owns these.
    cuda::detail::release_quietly("destroying the NCCL communicator", [comm, stream] {
      LOCKSTEP_NCCL_CHECK(ncclCommDestroy(comm));
      LOCKSTEP_CUDA_CHECK(cudaStreamDestroy(stream));
    });
    throw;
  }
}

}  // namespace lockstep
