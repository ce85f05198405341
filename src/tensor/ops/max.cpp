#include "tensor/ops/max.h"

#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/dispatch/max_kernels.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

namespace {

// Reduces `x` (a's data, detached, at least 1-D) along dimension d into values and indices of
// `out_shape`, and records the backward on `a`.
std::pair<Tensor, Tensor> max_along(const Tensor& a, const Tensor& x, int64_t d, const Shape& out_shape) {
  Tensor values = empty(out_shape, x.options());
  Tensor indices = empty(out_shape, TensorOptions().dtype(DType::i64).device(x.device()));
  kernels::max.call(x.device(), x, d, values, indices);
  // Only the selected element influenced the output: the gradient goes back to its position,
  // every other element gets zero. (The indices are returned too, so the caller could change them.)
  record(values, "MaxBackward", {a},
         [indices = SavedTensor(indices), d, line_shape = x.shape(), shape = a.shape()](const Tensor& g) {
           Tensor grad = empty(line_shape, g.options());
           kernels::max_backward.call(grad.device(), g, indices.unpack(), d, grad);
           return std::vector<Tensor>{grad.view(shape)};
         });
  return {values, indices};
}

std::pair<Tensor, Tensor> max_dim(const char* op, const Tensor& a, int64_t dim, bool keepdim) {
  check_defined(op, {&a});
  const int64_t d = wrap_dim(dim, a.dim(), op);
  // A 0-d tensor is a line of one element, and stays 0-d.
  if (a.dim() == 0) return max_along(a, a.detach().reshape({1}), 0, {});
  LOCKSTEP_CHECK(a.shape()[d] > 0, op, ": cannot reduce dimension ", dim, " of shape ", shape_str(a.shape()),
                 " because it is empty");
  Shape out_shape = a.shape();
  if (keepdim) {
    out_shape[d] = 1;
  } else {
    out_shape.erase(out_shape.begin() + d);
  }
  return max_along(a, a.detach(), d, out_shape);
}

}  // namespace

Tensor max(const Tensor& a) {
  check_defined("max", {&a});
  LOCKSTEP_CHECK(a.numel() > 0, "max: cannot take the max of an empty tensor (shape ", shape_str(a.shape()), ")");
  // All elements in a row, reduced along that row; the position it returns is not needed.
  Tensor value;
  {
    NoGradGuard no_grad;
    value = max_along(a, a.detach().reshape({a.numel()}), 0, {}).first;
  }
  // No one element was selected: every element equal to the maximum (every NaN, when the
  // maximum is NaN) shares the gradient evenly, as in PyTorch.
  return record(value, "MaxBackward", {a}, [a = SavedTensor(a), value = SavedTensor(value)](const Tensor& g) {
    const Tensor x = a.unpack(), m = value.unpack();
    const Tensor at_max = eq(x, m).to(g.dtype()) + ne(x, x).to(g.dtype()) * ne(m, m).to(g.dtype());
    return std::vector<Tensor>{at_max * (g / sum(at_max))};
  });
}

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) { return max_dim("max", a, dim, keepdim); }

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  // Positions have no gradient, so there is nothing to record.
  NoGradGuard no_grad;
  return max_dim("argmax", a, dim, keepdim).second;
}

}  // namespace lockstep
