#include "tensor/ops/dropout.h"

#include "tensor/autograd/node.h"
#include "core/error.h"
#include "core/generator.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/cuda/dropout_kernels.h"
#include "tensor/ops/elementwise.h"

namespace lockstep {

Tensor dropout(const Tensor& input, double p, bool training, Generator* generator) {
  check_defined("dropout", {&input});
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "dropout: expected a probability p between 0 and 1, got ", p);
  LOCKSTEP_CHECK(is_floating(input.dtype()), "dropout: expected a floating-point input, got ", dtype_name(input.dtype()));
  if (p == 0.0 || !training) return input;

  // Survivors are scaled by 1 / (1 - p); with p = 1 nothing survives and the scale is moot
  // (0, not infinity, which would turn the zeros into NaN).
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Tensor mask;  // input's shape and dtype, values 0 or scale
  if (input.device().is_cuda()) {
    // A GPU draws the mask itself with a counter-based generator (Philox): every element's
    // bits are a function of (key, element index), so no thread waits for another. One 64-bit
    // draw from the generator is the key, which keeps the mask fixed by the seed.
    uint64_t key = 0;
    {
      const auto lock = lock_default_generator(generator);
      key = (generator != nullptr ? *generator : default_generator()).next();
    }
    mask = empty(input.shape(), TensorOptions().dtype(input.dtype()).device(input.device()));
    cuda::dropout_mask(mask, p, scale, key, /*offset=*/0);
  } else {
    // Keep an element where its uniform draw is below 1 - p (probability 1 - p). The draws are
    // float64, so no uniform number rounds up to 1 before the comparison.
    const Tensor uniform = rand(input.shape(), TensorOptions().dtype(DType::f64), generator);
    const Tensor keep = lt(uniform, scalar_like(1.0 - p, uniform));
    mask = keep.to(input.dtype()) * scale;
  }

  const Tensor out = mul(input.detach(), mask);
  return record(out, "NativeDropoutBackward", {input}, [mask](const Tensor& g) { return std::vector<Tensor>{mul(g, mask)}; });
}

}  // namespace lockstep
