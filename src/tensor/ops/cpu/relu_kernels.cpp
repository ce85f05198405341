// ReLU's CPU kernels (declared in tensor/ops/dispatch/relu_kernels.h); their CUDA twins are in
// tensor/ops/cuda/relu_kernels.cu. Both passes are bound by memory, so they read and write
// each element once: the forward pass writes the mask's bits as it goes, and the backward
// pass reads 1 bit per element where it would have read 4 bytes of an f32 output.
//
// A byte of the mask holds 8 elements, so the portable loops work a byte at a time; with
// AVX-512 the f32 loops work 16 elements (two bytes) at a time, and the 16-bit loops (bf16,
// f16; AVX-512BW) 32 elements (four bytes): a comparison yields the bits directly. Threads share a tensor in the pieces of the elementwise kernels
// (for_each_row), which start at multiples of kRowPiece: at whole bytes of the mask, so no two
// threads write one byte.
#include "tensor/ops/dispatch/relu_kernels.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dispatch.h"
#include "core/half.h"
#include "tensor/strided_loop.h"
#include "tensor/ops/rules/elementwise_math.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace lockstep::cpu {

namespace {

// Elements [begin, n) of the forward pass, begin a multiple of 8: whole bytes of the mask.
template <class T>
void relu_bytes(const T* x, T* out, uint8_t* mask, int64_t begin, int64_t n) {
  using C = opmath_t<T>;
  const UnaryFn<UnaryOp::Relu> relu;
  for (int64_t byte = begin / 8; byte * 8 < n; ++byte) {
    uint8_t bits = 0;
    for (int64_t i = byte * 8; i < byte * 8 + 8 && i < n; ++i) {
      const C v = static_cast<C>(x[i]);
      out[i] = static_cast<T>(relu(v));
      // The gradient passes where relu's output is not <= 0: positive, or NaN.
      bits |= static_cast<uint8_t>(!(v <= C(0))) << (i % 8);
    }
    mask[byte] = bits;
  }
}

// Elements [begin, n) of the backward pass, begin a multiple of 8.
template <class T>
void relu_backward_bytes(const T* g, const uint8_t* mask, T* grad_input, int64_t begin, int64_t n) {
  using C = opmath_t<T>;
  for (int64_t i = begin; i < n; ++i) {
    const bool passes = (mask[i / 8] >> (i % 8)) & 1;
    grad_input[i] = static_cast<T>(passes ? static_cast<C>(g[i]) : C(0));
  }
}

// The bits of -infinity in a 16-bit float format: every bit pattern above it, read as an
// unsigned integer, is a negative NaN.
template <class T>
constexpr uint16_t negative_infinity_bits() {
  return std::is_same_v<T, BFloat16> ? 0xFF80 : 0xFC00;
}

template <class T>
constexpr bool is_16bit_float = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

// With AVX-512, f32 elements 16 at a time from the first, and with AVX-512BW 16-bit ones 32 at
// a time; each returns how many it did (a multiple of 16 or 32), and the byte loops above take
// the rest. Other types leave them all to those.
template <class T>
int64_t relu_vectors([[maybe_unused]] const T* x, [[maybe_unused]] T* out, [[maybe_unused]] uint8_t* mask,
                     [[maybe_unused]] int64_t n) {
#ifdef __AVX512F__
  if constexpr (std::is_same_v<T, float>) {
    const __m512 zero = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      // Lanes where v <= 0 (false for NaN, which passes) become +0, as relu writes them.
      const __mmask16 passes = static_cast<__mmask16>(~_mm512_cmp_ps_mask(v, zero, _CMP_LE_OQ));
      _mm512_storeu_ps(out + i, _mm512_maskz_mov_ps(passes, v));
      // Bit k of the 16 is element i + k: little-endian, the mask's byte order.
      const uint16_t bits = passes;
      std::memcpy(mask + i / 8, &bits, sizeof bits);
    }
    return i;
  }
#endif
#ifdef __AVX512BW__
  if constexpr (is_16bit_float<T>) {
    // A 16-bit float's bits compare as sign and magnitude, with no conversion: it passes when,
    // read as a signed integer, it is above 0 (positive and not +0, positive NaNs included),
    // or, read as an unsigned one, above -infinity (a negative NaN).
    const __m512i zero = _mm512_setzero_si512();
    const __m512i negative_infinity = _mm512_set1_epi16(static_cast<int16_t>(negative_infinity_bits<T>()));
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m512i v = _mm512_loadu_si512(x + i);
      const __mmask32 passes = _mm512_cmpgt_epi16_mask(v, zero) | _mm512_cmpgt_epu16_mask(v, negative_infinity);
      _mm512_storeu_si512(out + i, _mm512_maskz_mov_epi16(passes, v));
      const uint32_t bits = passes;
      std::memcpy(mask + i / 8, &bits, sizeof bits);
    }
    return i;
  }
#endif
  return 0;
}

template <class T>
int64_t relu_backward_vectors([[maybe_unused]] const T* g, [[maybe_unused]] const uint8_t* mask,
                              [[maybe_unused]] T* grad_input, [[maybe_unused]] int64_t n) {
#ifdef __AVX512F__
  if constexpr (std::is_same_v<T, float>) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      uint16_t bits;
      std::memcpy(&bits, mask + i / 8, sizeof bits);
      // A masked load: the gradient where the bit is set, +0 elsewhere.
      _mm512_storeu_ps(grad_input + i, _mm512_maskz_loadu_ps(bits, g + i));
    }
    return i;
  }
#endif
#ifdef __AVX512BW__
  if constexpr (is_16bit_float<T>) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      uint32_t bits;
      std::memcpy(&bits, mask + i / 8, sizeof bits);
      _mm512_storeu_si512(grad_input + i, _mm512_maskz_loadu_epi16(bits, g + i));
    }
    return i;
  }
#endif
  return 0;
}

static_assert(kRowPiece % 32 == 0, "a piece must start at a whole byte of the mask, and at a vector's first bit");

// Calls piece(first, count) for pieces of a dense tensor of n elements, on the threads.
template <class Piece>
void for_each_piece(int64_t n, Piece&& piece) {
  for_each_row<1>({n}, {Shape{1}}, {0}, [&](std::array<int64_t, 1> first, int64_t count, std::array<int64_t, 1>) {
    piece(first[0], count);
  });
}

}  // namespace

void relu_kernel(const Tensor& input, const Tensor& out, const Tensor& mask) {
  const int64_t n = input.numel();
  auto* bits = mask.data_ptr<uint8_t>();
  dispatch_floating_and_16bit(input.dtype(), "relu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = input.data_ptr<T>();
    T* o = out.data_ptr<T>();
    for_each_piece(n, [&](int64_t first, int64_t count) {
      uint8_t* piece_bits = bits + first / 8;
      relu_bytes(x + first, o + first, piece_bits, relu_vectors(x + first, o + first, piece_bits, count), count);
    });
  });
  // The padding to whole words, which no element's bit occupies.
  const int64_t used = (n + 7) / 8;
  std::memset(bits + used, 0, static_cast<size_t>(relu_mask_bytes(n) - used));
}

void relu_backward_kernel(const Tensor& grad_output, const Tensor& mask, const Tensor& grad_input) {
  const int64_t n = grad_output.numel();
  const auto* bits = mask.data_ptr<uint8_t>();
  dispatch_floating_and_16bit(grad_output.dtype(), "relu backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = grad_output.data_ptr<T>();
    T* gi = grad_input.data_ptr<T>();
    for_each_piece(n, [&](int64_t first, int64_t count) {
      const uint8_t* piece_bits = bits + first / 8;
      relu_backward_bytes(g + first, piece_bits, gi + first,
                          relu_backward_vectors(g + first, piece_bits, gi + first, count), count);
    });
  });
}

}  // namespace lockstep::cpu
