#include "distributed/process_group.h"

#include "core/error.h"

namespace lockstep {

namespace {
// The backends read and write a tensor as one block of memory.
void check_contiguous(const char* collective, const char* role, const Tensor& t) {
  LOCKSTEP_CHECK(t.defined(), collective, ": the ", role, " tensor is undefined");
  LOCKSTEP_CHECK(t.is_contiguous(), collective, ": expected a contiguous ", role, " tensor, got shape ",
                 shape_str(t.shape()), " with strides ", shape_str(t.strides()), " (call .contiguous() first)");
}

// An average of integers would have to round; PyTorch refuses it too.
void check_op(const char* collective, const Tensor& t, ReduceOp op) {
  LOCKSTEP_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), collective, ": ReduceOp::Avg needs a floating dtype, got ",
                 dtype_name(t.dtype()), " (use ReduceOp::Sum and divide)");
}

// all_gather and reduce_scatter move slices of `big` to and from `small`: one per rank.
void check_sliced(const char* collective, const Tensor& big, const Tensor& small, int ranks) {
  check_contiguous(collective, "input", big);
  check_contiguous(collective, "output", small);
  LOCKSTEP_CHECK(big.dtype() == small.dtype() && big.device() == small.device(), collective,
                 ": expected input and output of one dtype and device, got ", dtype_name(big.dtype()), " on ",
                 big.device().str(), " and ", dtype_name(small.dtype()), " on ", small.device().str());
  LOCKSTEP_CHECK(big.numel() == small.numel() * ranks, collective, ": expected the larger tensor to hold ", ranks,
                 " (the world size) times the elements of the smaller, got shapes ", shape_str(big.shape()), " and ",
                 shape_str(small.shape()));
}
}  // namespace

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {
  LOCKSTEP_CHECK(size >= 1 && rank >= 0 && rank < size, "ProcessGroup: expected 0 <= rank < size, got rank ", rank,
                 " of ", size);
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& tensor, ReduceOp op) {
  check_contiguous("all_reduce", "input", tensor);
  check_op("all_reduce", tensor, op);
  increment_version(tensor);
  return start_all_reduce(tensor, op);
}

std::shared_ptr<Work> ProcessGroup::broadcast_async(const Tensor& tensor, int root) {
  check_contiguous("broadcast", "input", tensor);
  LOCKSTEP_CHECK(root >= 0 && root < size_, "broadcast: expected a root rank in [0, ", size_, "), got ", root);
  increment_version(tensor);
  return start_broadcast(tensor, root);
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(const Tensor& output, const Tensor& input) {
  check_sliced("all_gather", output, input, size_);
  increment_version(output);
  return start_all_gather(output, input);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_sliced("reduce_scatter", input, output, size_);
  check_op("reduce_scatter", input, op);
  increment_version(output);
  return start_reduce_scatter(output, input, op);
}

std::shared_ptr<Work> ProcessGroup::barrier_async() { return start_barrier(); }

}  // namespace lockstep
