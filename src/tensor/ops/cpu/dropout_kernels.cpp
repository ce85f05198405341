// Dropout's mask on the CPU. mask: any shape, contiguous, n elements, f32/f64/f16/bf16; each
// element is `scale` (kept, probability 1 - p) or 0 (dropped). The rule that decides is Philox
// (tensor/ops/rules/philox.h), which the CUDA kernel (tensor/ops/cuda/dropout_kernels.cu) calls
// too, so both devices draw the same mask for the same seed.
//
// Decomposition: one Philox call yields four 32-bit words, so the loop runs over groups of four
// consecutive elements, spread over OpenMP threads. Every group's words come from (key, offset,
// group) alone, so the mask is the same with any number of threads.
#include "tensor/ops/dispatch/dropout_kernels.h"

#include "core/dispatch.h"
#include "core/error.h"
#include "tensor/ops/rules/philox.h"
#include "tensor/strided_loop.h"

namespace lockstep::cpu {

void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator) {
  LOCKSTEP_CHECK(mask.device().is_cpu() && mask.is_contiguous(),
                 "dropout: the CPU mask kernel needs a contiguous tensor on the CPU, got one on ", mask.device());
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "dropout: expected a probability p between 0 and 1, got ", p);
  const uint64_t key = dropout_key(generator);
  const int64_t n = mask.numel(), groups = (n + 3) / 4;
  const uint64_t threshold = dropout_threshold(p);
  dispatch_floating_and_16bit(mask.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The scale in T, rounded as the GPU rounds it: a 16-bit T from float, which the double
    // is rounded to first.
    const T kept = static_cast<T>(static_cast<opmath_t<T>>(scale)), dropped = static_cast<T>(0.0f);
    T* out = mask.data_ptr<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t g = 0; g < groups; ++g) dropout_mask_group(out, n, g, key, /*offset=*/0, threshold, kept, dropped);
  });
}

}  // namespace lockstep::cpu
