#include "tensor/ops/reduce.h"

#include "tensor/autocast.h"
#include "tensor/autograd/node.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/dispatch/reduce_kernels.h"

namespace lockstep {

namespace {

// Which dimensions `dims` names, as a mask; an empty list means all of them.
std::vector<bool> reduce_mask(const char* op, const Tensor& a, const Shape& dims) {
  std::vector<bool> mask(a.dim(), dims.empty());
  for (int64_t d : dims) {
    const int64_t nd = wrap_dim(d, a.dim(), op);
    // A 0-d tensor accepts dimension 0 or -1 (as PyTorch) and has nothing to mark.
    if (a.dim() == 0) continue;
    LOCKSTEP_CHECK(!mask[nd], op, ": dimension ", d, " appears more than once in the list");
    mask[nd] = true;
  }
  return mask;
}

// The output shape with reduced dimensions removed or kept as 1.
Shape reduced_shape(const Tensor& a, const std::vector<bool>& mask, bool keepdim) {
  Shape shape;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (!mask[d]) shape.push_back(a.shape()[d]);
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

}  // namespace

// sum and mean are on autocast's f32 list: in a region a 16-bit input is summed into an f32
// result, which keeps its precision for whatever is computed from it.
Tensor sum(const Tensor& a_in, const Shape& dims, bool keepdim) {
  check_defined("sum", {&a_in});
  const Tensor a = autocast::to_f32(a_in);
  const std::vector<bool> mask = reduce_mask("sum", a, dims);
  const Shape kept = reduced_shape(a, mask, true);
  // Integer and bool sums are i64 (counting true values is how accuracy is computed).
  const DType out_dtype = is_floating(a.dtype()) ? a.dtype() : DType::i64;
  Tensor out = empty(reduced_shape(a, mask, keepdim), TensorOptions().dtype(out_dtype).device(a.device()));
  kernels::sum.call(out.device(), a, mask, out);
  // Every input element contributed once to its output: the gradient is the output gradient
  // broadcast back over the reduced dimensions.
  return record(out, "SumBackward", {a}, [kept, shape = a.shape()](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(kept).expand(shape)};
  });
}

Tensor sum(const Tensor& a) { return sum(a, {}, false); }

Tensor mean(const Tensor& a_in, const Shape& dims, bool keepdim) {
  check_defined("mean", {&a_in});
  const Tensor a = autocast::to_f32(a_in);
  // A 16-bit mean is taken in f32 and rounded once, as PyTorch's CPU mean does: an f16 sum can
  // overflow where the mean would not, and bf16 cannot even hold a count above 256 exactly.
  if (a.dtype() == DType::f16 || a.dtype() == DType::bf16) return mean(a.to(DType::f32), dims, keepdim).to(a.dtype());
  const std::vector<bool> mask = reduce_mask("mean", a, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < a.dim(); ++d) count *= mask[d] ? a.shape()[d] : 1;
  return sum(a, dims, keepdim) / static_cast<double>(count);
}

Tensor mean(const Tensor& a) { return mean(a, {}, false); }

Tensor sum_to(const Tensor& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  // Leading dimensions that `shape` lacks, and dimensions where it has size 1, were broadcast.
  const int64_t lead = a.dim() - static_cast<int64_t>(shape.size());
  LOCKSTEP_CHECK(lead >= 0, "sum_to: cannot reduce shape ", shape_str(a.shape()), " to ", shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && a.shape()[d] != 1)) dims.push_back(d);
  }
  if (dims.empty()) return a.reshape(shape);
  return sum(a, dims, true).reshape(shape);
}

}  // namespace lockstep
