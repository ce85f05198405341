#include "ops/dropout.h"

#include "autograd/node.h"
#include "core/error.h"
#include "core/generator.h"
#include "ops/checks.h"
#include "ops/elementwise.h"

namespace lockstep {

Tensor dropout(const Tensor& input, double p, bool training, Generator* generator) {
  check_defined("dropout", {&input});
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "dropout: expected a probability p between 0 and 1, got ", p);
  LOCKSTEP_CHECK(is_floating(input.dtype()), "dropout: expected a floating-point input, got ", dtype_name(input.dtype()));
  if (p == 0.0 || !training) return input;

  // Keep an element where its uniform draw is below 1 - p (probability 1 - p). The draws are
  // float64, so no uniform number rounds up to 1 before the comparison.
  const Tensor uniform = rand(input.shape(), TensorOptions().dtype(DType::f64).device(input.device()), generator);
  const Tensor keep = lt(uniform, scalar_like(1.0 - p, uniform));
  // Survivors are scaled by 1 / (1 - p); with p = 1 nothing survives and the scale is moot
  // (0, not infinity, which would turn the zeros into NaN).
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  const Tensor mask = keep.to(input.dtype()) * scale;  // mask: input's shape, values 0 or scale

  const Tensor out = mul(input.detach(), mask);
  return record(out, "NativeDropoutBackward", {input}, [mask](const Tensor& g) { return std::vector<Tensor>{mul(g, mask)}; });
}

}  // namespace lockstep
