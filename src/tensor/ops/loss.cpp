#include "tensor/ops/loss.h"

#include "tensor/autocast.h"
#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch/loss_kernels.h"

namespace lockstep {

namespace {

// What both losses need: `input` (N, C) and `target` (N) of i64 class indices in [0, C).
// `what` names the input in messages ("logits", "log_probs").
void check_classification(const char* op, const char* what, const Tensor& input, const Tensor& target) {
  check_same_device(op, {&input, &target});
  LOCKSTEP_CHECK(input.dim() == 2, op, ": expected ", what, " to be 2-D (N, C), got shape ", shape_str(input.shape()));
  LOCKSTEP_CHECK(target.dtype() == DType::i64, op, ": expected target to hold class indices as i64, got ",
                 dtype_name(target.dtype()), " (convert with .to(DType::i64))");
  const int64_t rows = input.size(0), classes = input.size(1);
  LOCKSTEP_CHECK(target.dim() == 1 && target.size(0) == rows, op, ": expected target of shape [", rows,
                 "], one class index per row of ", what, " ", shape_str(input.shape()), ", got shape ",
                 shape_str(target.shape()));
  // A class index outside [0, C) would read outside the row: refuse it, naming the row. On a
  // GPU, looking at the targets here would stall until they were copied back; the CUDA
  // kernels check them on the device instead and make the loss NaN (see
  // tensor/ops/dispatch/loss_kernels.h).
  if (target.device().is_cuda()) return;
  const Tensor t = target.contiguous();
  const int64_t* classes_of = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i) {
    LOCKSTEP_CHECK(classes_of[i] >= 0 && classes_of[i] < classes, op, ": target ", classes_of[i],
                   " is out of range for ", classes, " classes (row ", i, ")");
  }
}

}  // namespace

// Both losses are on autocast's f32 list: a mean of many logarithms, which 16 bits would blur.
Tensor cross_entropy(const Tensor& logits_in, const Tensor& target) {
  const Tensor logits = autocast::to_f32(logits_in);
  check_classification("cross_entropy", "logits", logits, target);
  const TensorOptions options = logits.options();
  Tensor log_probs = empty(logits.shape(), options);
  Tensor loss = empty({}, options);
  kernels::cross_entropy.call(loss.device(), logits.detach(), target, log_probs, loss);
  // The gradient (softmax - onehot(target)) / N needs the softmax: keep its logarithm, which
  // the forward pass computed anyway.
  // (log_probs is the op's own; the target is the caller's, who might refill it in place.)
  return record(loss, "CrossEntropyBackward", {logits}, [log_probs, target_saved = SavedTensor(target)](const Tensor& g) {
    const Tensor target = target_saved.unpack();
    Tensor grad = empty(log_probs.shape(), log_probs.options());
    kernels::cross_entropy_backward.call(grad.device(), g, log_probs, target, grad);
    return std::vector<Tensor>{grad};
  });
}

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& target) {
  const Tensor log_probs = autocast::to_f32(log_probs_in);
  check_classification("nll_loss", "log_probs", log_probs, target);
  Tensor loss = empty({}, log_probs.options());
  kernels::nll_loss.call(loss.device(), log_probs.detach(), target, loss);
  // Each row's picked entry enters the mean with weight -1/N; nothing else matters.
  return record(loss, "NllLossBackward", {log_probs},
                [shape = log_probs.shape(), target = SavedTensor(target)](const Tensor& g) {
                  Tensor grad = empty(shape, g.options());
                  kernels::nll_loss_backward.call(grad.device(), g, target.unpack(), grad);
                  return std::vector<Tensor>{grad};
                });
}

}  // namespace lockstep
