#include "tensor/ops/cat.h"

#include "tensor/autograd/node.h"
#include "core/error.h"
#include "tensor/ops/checks.h"

namespace lockstep {

namespace {

// "[2, 3] (tensor 1)": how messages point at one tensor of the list.
std::string describe(const std::vector<Tensor>& tensors, size_t k) {
  return detail::concat(shape_str(tensors[k].shape()), " (tensor ", k, ")");
}

// Checks shared by cat and stack: a non-empty list of defined tensors on one device, of one dtype.
void check_list(const char* op, const std::vector<Tensor>& tensors) {
  LOCKSTEP_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  for (size_t k = 0; k < tensors.size(); ++k) {
    LOCKSTEP_CHECK(tensors[k].defined(), op, ": tensor ", k, " is undefined");
    LOCKSTEP_CHECK(tensors[k].device() == tensors[0].device(), op, ": expected all tensors on the same device, got ",
                   tensors[0].device(), " (tensor 0) and ", tensors[k].device(), " (tensor ", k, ")");
    LOCKSTEP_CHECK(tensors[k].dtype() == tensors[0].dtype(), op, ": expected all tensors to have the same dtype, got ",
                   dtype_name(tensors[0].dtype()), " (tensor 0) and ", dtype_name(tensors[k].dtype()), " (tensor ", k,
                   "); convert with .to(DType::", dtype_name(tensors[0].dtype()), ")");
  }
}

// cat without the list checks; `op` names the public caller in messages.
Tensor cat_checked(const char* op, const std::vector<Tensor>& tensors, int64_t dim) {
  const Tensor& first = tensors[0];
  LOCKSTEP_CHECK(first.dim() > 0, op, ": tensor 0 is 0-d and cannot be concatenated (use stack, or unsqueeze it first)");
  const int64_t d = wrap_dim(dim, first.dim(), op);
  // Every other dimension must line up; the output is as long as all inputs together along d.
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    LOCKSTEP_CHECK(t.dim() == first.dim(), op, ": expected all tensors to have the same number of dimensions, got ",
                   describe(tensors, 0), " and ", describe(tensors, k));
    for (int64_t e = 0; e < t.dim(); ++e) {
      LOCKSTEP_CHECK(e == d || t.shape()[e] == first.shape()[e], op, ": sizes must match except in dimension ", d,
                     ", got ", describe(tensors, 0), " and ", describe(tensors, k), ", which differ in dimension ", e);
    }
    shape[d] += t.shape()[d];
  }

  // Input k lands in the output's slice [starts[k], starts[k] + size) along d.
  Tensor out = empty(shape, first.options());
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    starts.push_back(start);
    out.slice(d, start, start + t.shape()[d]).copy_(t);
    start += t.shape()[d];
  }
  starts.push_back(start);
  // Each input's gradient is the same slice of the output's gradient: a view, no copy.
  return record(out, "CatBackward", tensors, [d, starts](const Tensor& g) {
    std::vector<Tensor> grads;
    for (size_t k = 0; k + 1 < starts.size(); ++k) grads.push_back(g.slice(d, starts[k], starts[k + 1]));
    return grads;
  });
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list("cat", tensors);
  return cat_checked("cat", tensors, dim);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list("stack", tensors);
  for (size_t k = 0; k < tensors.size(); ++k) {
    LOCKSTEP_CHECK(tensors[k].shape() == tensors[0].shape(), "stack: expected all tensors to have the same shape, got ",
                   describe(tensors, 0), " and ", describe(tensors, k));
  }
  // The new dimension may go anywhere from before the first to after the last.
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return cat_checked("stack", parts, d);
}

}  // namespace lockstep
