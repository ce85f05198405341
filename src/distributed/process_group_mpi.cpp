// The MPI backend of ProcessGroup (declared in distributed/process_group_mpi.h).
//
// MPI's collectives block the thread that calls them. To let a caller start a collective and go
// on (DDP starts a bucket's all-reduce and goes on with backward), each group owns one worker
// thread that takes collectives from a queue and runs them one after another, in the order they
// were started: the same order on every rank, as MPI requires. Work::wait() blocks until the
// worker has finished that collective.
#include <mpi.h>

#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>

#include "core/half.h"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_reduce_ops.h"
#include "distributed/process_group_mpi.h"
#include "util/trace.h"

namespace lockstep {

namespace {

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    case DType::u8: return MPI_UINT8_T;
    // No 16-bit float in MPI: the bytes travel as 16-bit integers, and reductions use
    // Lockstep's own ops, which know what the bits mean (distributed/mpi_reduce_ops.h).
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;
    default:
      LOCKSTEP_FAIL("the MPI backend cannot send ", dtype_name(dtype),
                    " tensors (it handles f32, f64, f16, bf16, i64, i32 and u8; convert bool with ",
                    ".to(DType::u8))");
  }
}

int mpi_count(const Tensor& t) {
  LOCKSTEP_CHECK(t.numel() <= INT_MAX, "the MPI backend sends at most ", INT_MAX, " elements per collective, got ",
                 t.numel(), " (split the tensor)");
  return static_cast<int>(t.numel());
}

// p[i] /= n, computed in float for 16-bit elements (rounded to 16 bits once), else in T.
template <class T>
void divide_elements(const Tensor& t, int n) {
  using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = t.data_ptr<T>();
  const int64_t count = t.numel();
  for (int64_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<Compute>(p[i]) / static_cast<Compute>(n));
}

// Divides a floating CPU tensor's elements by `n`, in place, on the calling (worker) thread.
// (ProcessGroup refuses ReduceOp::Avg for other dtypes before a collective starts.)
void divide(const Tensor& t, int n) {
  switch (t.dtype()) {
    case DType::f32: return divide_elements<float>(t, n);
    case DType::f64: return divide_elements<double>(t, n);
    case DType::f16: return divide_elements<Half>(t, n);
    default: return divide_elements<BFloat16>(t, n);
  }
}

// MPI reads and writes host memory. A CPU tensor is used as it is; a GPU tensor is staged in
// pinned host memory: copied there when the collective starts, if MPI reads it (on the caller's
// thread, so the copy sees the values the caller computed), and copied back when the caller
// waits, if MPI writes it.
struct HostView {
  Tensor device_tensor;  // the caller's tensor
  Tensor host;           // what MPI reads and writes: the same tensor on the CPU, else a copy
  bool copy_back;        // whether wait() must copy `host` into `device_tensor`
};

HostView host_view(const Tensor& t, bool read, bool written) {
  if (t.device().is_cpu()) return {t, t, false};
  Tensor staged = empty(t.shape(), TensorOptions().dtype(t.dtype()).pinned_memory(true));
  if (read) cuda::copy_between_devices(t, staged, /*non_blocking=*/false);
  return {t, staged, written};
}

class MpiWork : public Work {
 public:
  explicit MpiWork(std::vector<HostView> outputs) : outputs_(std::move(outputs)) {}

  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_changed_.wait(lock, [this] { return done_; });
    if (error_) std::rethrow_exception(error_);
    // Copy staged results back to the GPU once, on the waiting (caller's) thread.
    for (HostView& view : outputs_) {
      // Queued on the GPU's stream; the pinned block is not reused before the copy has run.
      if (view.copy_back) cuda::copy_between_devices(view.host, view.device_tensor, /*non_blocking=*/true);
      view.copy_back = false;
    }
    // The tensors are the caller's again: a Work kept longer (the watchdog keeps each until it
    // next looks) must not keep their memory alive.
    outputs_.clear();
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }

  // Called by the worker when the collective has finished (or failed).
  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
      error_ = error;
    }
    done_changed_.notify_all();
  }

 private:
  std::vector<HostView> outputs_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::exception_ptr error_;
};

class ProcessGroupMPI : public ProcessGroup {
 public:
  ProcessGroupMPI(MPI_Comm comm, int rank, int size, const ProcessGroupOptions& options)
      : ProcessGroup(rank, size, options), comm_(comm) {
    worker_ = std::thread([this] { run_worker(); });
    try {
      start_watchdog(mpi_watchdog_hooks());
    } catch (...) {
      stop_worker();
      MPI_Comm_free(&comm_);
      throw;
    }
  }

  ~ProcessGroupMPI() override {
    // The watchdog (the base class's) still watches what the worker finishes here.
    stop_worker();
    if (mpi::is_initialized()) MPI_Comm_free(&comm_);
  }

  std::string backend_name() const override { return "mpi"; }

 protected:
  std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) override {
    HostView view = host_view(tensor, /*read=*/true, /*written=*/true);
    const MPI_Datatype type = mpi_datatype(tensor.dtype());
    const MPI_Op reduce = mpi::reduce_op(tensor.dtype(), op);
    const int count = mpi_count(tensor);
    const Tensor host = view.host;
    return enqueue("all_reduce", tensor.nbytes(), {view}, [=] {
      LOCKSTEP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, host.data(), count, type, reduce, comm_));
      if (op == ReduceOp::Avg) divide(host, size());  // MPI has no average: the sum, divided
    });
  }

  std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) override {
    HostView view = host_view(tensor, /*read=*/rank() == root, /*written=*/rank() != root);
    const MPI_Datatype type = mpi_datatype(tensor.dtype());
    const int count = mpi_count(tensor);
    const Tensor host = view.host;
    return enqueue("broadcast", tensor.nbytes(), {view}, [=] {
      LOCKSTEP_MPI_CHECK(MPI_Bcast(host.data(), count, type, root, comm_));
    });
  }

  std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) override {
    HostView in = host_view(input, /*read=*/true, /*written=*/false);
    HostView out = host_view(output, /*read=*/false, /*written=*/true);
    const MPI_Datatype type = mpi_datatype(input.dtype());
    const int count = mpi_count(input);
    const Tensor send = in.host, receive = out.host;
    return enqueue("all_gather", output.nbytes(), {in, out}, [=] {
      LOCKSTEP_MPI_CHECK(MPI_Allgather(send.data(), count, type, receive.data(), count, type, comm_));
    });
  }

  std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override {
    HostView in = host_view(input, /*read=*/true, /*written=*/false);
    HostView out = host_view(output, /*read=*/false, /*written=*/true);
    const MPI_Datatype type = mpi_datatype(input.dtype());
    const MPI_Op reduce = mpi::reduce_op(input.dtype(), op);
    const int count = mpi_count(output);
    const Tensor send = in.host, receive = out.host;
    return enqueue("reduce_scatter", input.nbytes(), {in, out}, [=] {
      LOCKSTEP_MPI_CHECK(MPI_Reduce_scatter_block(send.data(), receive.data(), count, type, reduce, comm_));
      if (op == ReduceOp::Avg) divide(receive, size());
    });
  }

  std::shared_ptr<Work> start_barrier() override {
    return enqueue("barrier", 0, {}, [=] { LOCKSTEP_MPI_CHECK(MPI_Barrier(comm_)); });
  }

 private:
  // Lets the worker finish the queued collectives, then ends it.
  void stop_worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    queue_changed_.notify_all();
    worker_.join();
  }

  struct Task {
    std::shared_ptr<MpiWork> work;
    std::function<void()> run;
    const char* what;  // for the trace: "all_reduce" ...
    int64_t bytes;     // ... and its size
  };

  // Hands a collective to the worker; its Work keeps the staged tensors alive until waited for.
  // `what` and `bytes` name it on the worker's row of a trace.
  std::shared_ptr<Work> enqueue(const char* what, int64_t bytes, std::vector<HostView> views,
                                std::function<void()> run) {
    auto work = std::make_shared<MpiWork>(std::move(views));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({work, std::move(run), what, bytes});
    }
    queue_changed_.notify_one();
    return work;
  }

  // The worker: runs queued collectives in order until the group is destroyed and the queue is
  // empty. An error in one collective is handed to whoever waits for it.
  void run_worker() {
    set_trace_thread_name("MPI worker");
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr error;
      try {
        const RecordFunction span([&] { return detail::concat(task.what, " ", bytes_str(task.bytes)); }, "comm");
        task.run();
      } catch (...) {
        error = std::current_exception();
      }
      // Let go of the tensors the collective captured before the caller learns it finished:
      // their memory is then freed on the caller's schedule, never behind its back.
      task.run = nullptr;
      task.work->finish(error);
    }
  }

  MPI_Comm comm_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::deque<Task> queue_;
  bool stopping_ = false;
};

}  // namespace

WatchdogHooks mpi_watchdog_hooks() {
  WatchdogHooks hooks;
  // Long enough for a busy rank's service to answer, short against any deadline.
  constexpr double kGrace = 2.0;
  if (mpi::progress_service_running()) hooks.ask_peers = [](uint64_t group) { return mpi::ask_peers(group, kGrace); };
  hooks.end_job = [](int code) { mpi::abort(code); };
  return hooks;
}

std::shared_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options) {
  mpi::initialize();
  MPI_Comm comm;
  LOCKSTEP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0, size = 1;
  LOCKSTEP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  LOCKSTEP_MPI_CHECK(MPI_Comm_size(comm, &size));
  return std::make_shared<ProcessGroupMPI>(comm, rank, size, options);
}

}  // namespace lockstep
