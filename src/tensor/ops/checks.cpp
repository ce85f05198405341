#include "tensor/ops/checks.h"

#include "core/error.h"

namespace lockstep {

void check_defined(const char* op, std::initializer_list<const Tensor*> tensors) {
  int index = 0;
  for (const Tensor* t : tensors) {
    LOCKSTEP_CHECK(t->defined(), op, ": argument ", index, " is an undefined tensor");
    ++index;
  }
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  check_defined(op, tensors);
  const Device first = (*tensors.begin())->device();
  for (const Tensor* t : tensors) {
    LOCKSTEP_CHECK(t->device() == first, op, ": expected all tensors on the same device, got ", first, " and ",
                   t->device());
  }
}

void check_same_dtype(const char* op, std::initializer_list<const Tensor*> tensors) {
  check_defined(op, tensors);
  const DType first = (*tensors.begin())->dtype();
  for (const Tensor* t : tensors) {
    LOCKSTEP_CHECK(t->dtype() == first, op, ": expected all tensors to have the same dtype, got ", dtype_name(first),
                   " and ", dtype_name(t->dtype()), " (convert one with .to(DType::", dtype_name(first), "))");
  }
}

void check_dim(const char* op, const Tensor& t, int64_t dims, const char* what) {
  LOCKSTEP_CHECK(t.dim() == dims, op, ": expected ", what, " to be ", dims, "-D, got shape ", shape_str(t.shape()));
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  // Align from the right; each pair of sizes must match or contain a 1.
  const size_t dims = std::max(a.size(), b.size());
  Shape out(dims);
  for (size_t i = 0; i < dims; ++i) {
    const int64_t sa = i < dims - a.size() ? 1 : a[i - (dims - a.size())];
    const int64_t sb = i < dims - b.size() ? 1 : b[i - (dims - b.size())];
    LOCKSTEP_CHECK(sa == sb || sa == 1 || sb == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                   " cannot be broadcast (dimension ", i, " has sizes ", sa, " and ", sb, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace lockstep
