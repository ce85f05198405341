// Dropout's mask on a GPU. mask: any shape, contiguous, n elements, f32/f64/f16/bf16; each element
// is `scale` (kept, probability 1 - p) or 0 (dropped). The rule that decides is Philox
// (tensor/ops/rules/philox.h), keyed by one 64-bit draw from the Generator; the CPU kernel
// (tensor/ops/cpu/dropout_kernels.cpp) is its reference and calls the same rule, so both devices
// draw the same mask for the same seed.
//
// Decomposition: one Philox call yields four 32-bit words, so thread t of the grid-stride loop
// takes group g of four consecutive elements (4g .. 4g + 3) and keeps element 4g + j when
// word j is below the threshold. The mask depends only on (seed, offset, element index); the
// launcher uses offset 0 and one fresh seed per mask.
#include "tensor/ops/dispatch/dropout_kernels.h"

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "core/error.h"
#include "tensor/ops/rules/philox.h"

namespace lockstep::cuda {

namespace {

// mask[i] = word_i < threshold ? scale : 0 for i in [0, n), four elements per Philox call.
template <class T>
__global__ void dropout_mask_elements(T* mask, int64_t n, uint64_t threshold, double scale, uint64_t seed,
                                    uint64_t offset) {
  const T kept = convert<T>(scale), dropped = convert<T>(0.0);
  const int64_t groups = (n + 3) / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    dropout_mask_group(mask, n, g, seed, offset, threshold, kept, dropped);
  }
}

}  // namespace

void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator) {
  LOCKSTEP_CHECK(mask.device().is_cuda() && mask.is_contiguous(),
                 "dropout: the CUDA mask kernel needs a contiguous tensor on a GPU, got one on ", mask.device());
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "dropout: expected a probability p between 0 and 1, got ", p);
  // Every thread draws its elements' bits from (key, element index), so no thread waits for
  // another; the generator is consulted once, for the key, even for an empty mask.
  const uint64_t seed = dropout_key(generator);
  const int64_t n = mask.numel();
  if (n == 0) return;
  const uint64_t threshold = dropout_threshold(p);
  const cudaStream_t stream = stream_for(mask.device());
  dispatch_all(mask.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      using D = device_type_t<T>;
      dropout_mask_elements<D><<<grid_size((n + 3) / 4), kBlockSize, 0, stream>>>(
          reinterpret_cast<D*>(mask.data_ptr<T>()), n, threshold, scale, seed, /*offset=*/0);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    } else {
      LOCKSTEP_FAIL("dropout: expected a floating-point input, got ", dtype_name(mask.dtype()));
    }
  });
}

}  // namespace lockstep::cuda
