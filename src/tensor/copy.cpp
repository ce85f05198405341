#include "tensor/copy.h"

#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch/copy_kernels.h"

namespace lockstep {

namespace {
// A destination with a stride-0 (expanded) dimension would write several results into one
// memory location, and under OpenMP race on it.
void check_writable(const Tensor& dst, const char* op) {
  for (int64_t d = 0; d < dst.dim(); ++d) {
    LOCKSTEP_CHECK(dst.strides()[d] != 0 || dst.shape()[d] <= 1, op, ": the tensor written to is expanded (stride 0 ",
                   "in dimension ", d, "), so several of its elements share one memory location; write to a "
                   "contiguous() copy instead");
  }
}
}  // namespace

void copy_strided(const Tensor& src, const Tensor& dst) {
  // Across devices the data first travels to dst's device, then lands in dst's layout there.
  if (src.device() != dst.device()) return copy_strided(src.detach().to(dst.device()), dst);
  check_writable(dst, "copy_");
  kernels::copy.call(dst.device(), src, dst);
}

void fill_strided(const Tensor& dst, double value) {
  check_writable(dst, "fill_");
  kernels::fill.call(dst.device(), dst, value);
}

void axpy_strided(double alpha, const Tensor& src, const Tensor& dst) {
  check_same_device("add_", {&src, &dst});
  check_writable(dst, "add_");
  LOCKSTEP_CHECK(src.dtype() == dst.dtype(), "add_: expected both tensors to have the same dtype, got ",
                 dtype_name(dst.dtype()), " and ", dtype_name(src.dtype()));
  kernels::axpy.call(dst.device(), alpha, src, dst);
}

void scale_strided(double value, const Tensor& dst) {
  check_writable(dst, "mul_");
  kernels::scale.call(dst.device(), value, dst);
}

}  // namespace lockstep
