// Dropout's mask on a GPU. mask: any shape, contiguous, n elements, f32/f64/f16/bf16; each element
// is `scale` (kept, probability 1 - p) or 0 (dropped). CPU reference: tensor/ops/dropout.cpp draws
// one uniform double per element from a sequential Generator; the GPU cannot share such a sequence
// between threads, so it uses Philox-4x32-10 (dropout_kernels.h) keyed by one 64-bit draw from that
// Generator. The two devices therefore give different masks for the same seed, each reproducible on
// its own.
//
// Decomposition: one Philox call yields four 32-bit words, so thread t of the grid-stride loop
// takes group g of four consecutive elements (4g .. 4g + 3) and keeps element 4g + j when
// word j is below the threshold. The mask depends only on (seed, offset, element index); the
// launcher uses offset 0 and one fresh seed per mask.
#include "tensor/ops/dispatch/dropout_kernels.h"

#include <cmath>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "core/error.h"

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
    // The counter names this group uniquely within the call; the key names the call.
    const Philox4x32 counter{{static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                              static_cast<uint32_t>(g), static_cast<uint32_t>(static_cast<uint64_t>(g) >> 32)}};
    const Philox4x32 bits = philox4x32_10(counter, seed);
    // The last group may be partial: only elements below n exist.
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * g + j;
      if (i < n) mask[i] = static_cast<uint64_t>(bits.word[j]) < threshold ? kept : dropped;
    }
  }
}

}  // namespace

void dropout_mask_kernel(const Tensor& mask, double p, double scale, Generator* generator) {
  LOCKSTEP_CHECK(mask.device().is_cuda() && mask.is_contiguous(),
                 "dropout: the CUDA mask kernel needs a contiguous tensor on a GPU, got one on ", mask.device());
  LOCKSTEP_CHECK(p >= 0.0 && p <= 1.0, "dropout: expected a probability p between 0 and 1, got ", p);
  // Every thread draws its elements' bits from (key, element index), so no thread waits for
  // another; the generator is consulted once, for the key, even for an empty mask.
  uint64_t seed = 0;
  {
    const auto lock = lock_default_generator(generator);
    seed = (generator != nullptr ? *generator : default_generator()).next();
  }
  const int64_t n = mask.numel();
  if (n == 0) return;
  // A 32-bit word is uniform on [0, 2^32): it falls below t with probability t / 2^32. With
  // t = 2^32 (p = 0) every element is kept, with t = 0 (p = 1) none.
  const uint64_t threshold = static_cast<uint64_t>(std::llround((1.0 - p) * 4294967296.0));
  const cudaStream_t stream = stream_for(mask.device());
  dispatch_all(mask.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      using D = device_type_t<T>;
      dropout_mask_elements<D><<<grid_size((n + 3) / 4), kBlockSize, 0, stream>>>(
          reinterpret_cast<D*>(mask.data_ptr<T>()), n, threshold, scale, seed, /*offset=*/0);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    } else {
      throw Error(lockstep::detail::concat("dropout: expected a floating-point input, got ", dtype_name(mask.dtype())));
    }
  });
}

}  // namespace lockstep::cuda
