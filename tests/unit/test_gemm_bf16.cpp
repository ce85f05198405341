// Tests for the bf16 GEMM (src/tensor/ops/cpu/gemm_bf16.cpp, gemm_bf16_amx.cpp) against
// cpu::gemm<float> on the same bf16 values widened to f32, on every path this CPU runs: AMX tiles,
// vdpbf16ps and the f32 fallback on a recent Xeon, the last two on an AMD Zen 4.
//
// Tolerance. A product of two bf16 values (8-bit significands) has at most 16 significant bits,
// so it is exact in f32 (24 bits) on both sides. What differs is the order in which the K
// products are added in f32 (pairs first with vdpbf16ps, a different split of K into slices).
// Summing n terms in any order makes an error of at most (n - 1) u sum|term| with u = 2^-24
// (to first order; Higham, "Accuracy and Stability of Numerical Algorithms", 4.2), and scaling
// by alpha and adding beta * C adds three more roundings. So each side lies within
// (K + 3) u S of the exact result, with S = |alpha| sum_k |A(i,k) B(k,j)| + |beta C(i,j)|,
// and the two within twice that of each other: |bf16 - f32| <= 2 (K + 3) u S.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/half.h"
#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_16bit.h"
#include "tensor/ops/cpu/gemm_bf16.h"

namespace {

using lockstep::BFloat16;
using lockstep::cpu::GemmBf16Path;

constexpr double kUnitRoundoffF32 = 1.0 / (1 << 24);  // 2^-24
constexpr double kUnitRoundoffBf16 = 1.0 / (1 << 8);   // 2^-8: 8 significant bits

// The paths under test: each one this CPU runs, called through gemm_bf16_on.
std::vector<GemmBf16Path> available_paths() {
  std::vector<GemmBf16Path> paths;
  for (GemmBf16Path path : {GemmBf16Path::amx_bf16, GemmBf16Path::avx512_bf16, GemmBf16Path::f32_fallback})
    if (lockstep::cpu::gemm_bf16_path_available(path)) paths.push_back(path);
  return paths;
}

// A strided rows x cols matrix of random values in [-1, -0.1] U [0.1, 1], both as f32 and
// rounded to bf16; with `transposed` the buffer holds it column-major.
struct Operand {
  std::vector<float> exact;
  std::vector<BFloat16> bf16;
  std::vector<float> widened;  // bf16, back in f32
  int64_t row_stride;
  int64_t col_stride;
};

Operand random_matrix(int64_t rows, int64_t cols, bool transposed, std::mt19937& rng) {
  std::uniform_real_distribution<float> magnitude(0.1f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  Operand m{std::vector<float>(rows * cols), {}, {}, transposed ? 1 : cols, transposed ? rows : 1};
  for (float& x : m.exact) x = negative(rng) ? -magnitude(rng) : magnitude(rng);
  m.bf16.assign(m.exact.begin(), m.exact.end());
  m.widened.assign(m.bf16.begin(), m.bf16.end());
  return m;
}

// One call to check: its shape and options.
struct Case {
  int64_t M, N, K;
  bool transpose_a = false;
  bool transpose_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  int64_t c_padding = 0;  // c_row_stride = N + c_padding
};

// The inputs of one case, and C before the call: random where beta reads it, NaN where it is
// write-only (a read would show), and a sentinel in the padding past N that must survive.
struct Problem {
  Case t;
  Operand a, b;
  int64_t ldc;
  std::vector<float> c;
  static constexpr float kSentinel = -12345.0f;

  Problem(const Case& t_, uint32_t seed) : t(t_), ldc(t_.N + t_.c_padding) {
    std::mt19937 rng(seed);
    a = random_matrix(t.M, t.K, t.transpose_a, rng);
    b = random_matrix(t.K, t.N, t.transpose_b, rng);
    c = random_matrix(t.M, ldc, false, rng).exact;
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        if (j >= t.N) c[i * ldc + j] = kSentinel;
        else if (t.beta == 0.0f) c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
      }
  }

  std::vector<float> run(GemmBf16Path path) const {
    std::vector<float> out = c;
    lockstep::cpu::gemm_bf16_on(path, t.M, t.N, t.K, t.alpha, a.bf16.data(), a.row_stride, a.col_stride, b.bf16.data(),
         b.row_stride, b.col_stride, t.beta, out.data(), ldc);
    return out;
  }

  // cpu::gemm<float> on the operands `which` (Operand::widened or Operand::exact).
  std::vector<float> run_f32(std::vector<float> Operand::*which) const {
    std::vector<float> out = c;
    lockstep::cpu::gemm<float>(t.M, t.N, t.K, t.alpha, (a.*which).data(), a.row_stride,
                               a.col_stride, (b.*which).data(), b.row_stride, b.col_stride, t.beta,
                               out.data(), ldc);
    return out;
  }

  // S of the file comment: |alpha| sum_k |A(i,k) B(k,j)| + |beta C(i,j)|, on the bf16 values.
  double magnitude(int64_t i, int64_t j) const {
    double s = 0;
    for (int64_t k = 0; k < t.K; ++k)
      s += std::abs(double(a.widened[i * a.row_stride + k * a.col_stride]) *
                    double(b.widened[k * b.row_stride + j * b.col_stride]));
    s *= std::abs(double(t.alpha));
    if (t.beta != 0.0f) s += std::abs(double(t.beta) * double(c[i * ldc + j]));
    return s;
  }

  // Checks `got` against `want` element by element within `relative` * magnitude(i, j), and
  // that the padding of C kept its sentinel.
  void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                    double relative) const {
    int64_t failures = 0;
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const float g = got[i * ldc + j];
        if (j >= t.N) {
          ASSERT_EQ(g, kSentinel) << "padding of C overwritten at (" << i << ", " << j << ")";
          continue;
        }
        const float w = want[i * ldc + j];
        const double bound = relative * magnitude(i, j);
        const bool ok = std::isfinite(g) && std::abs(double(g) - double(w)) <= bound;
        if (!ok && ++failures <= 5)
          ADD_FAILURE() << "C(" << i << ", " << j << ") = " << g << ", want " << w << " within "
                        << bound;
      }
    EXPECT_EQ(failures, 0);
  }
};

// Both paths against cpu::gemm<float> on the widened bf16 values, within 2 (K + 3) u S.
void check(const Case& t, uint32_t seed = 1234) {
  SCOPED_TRACE(::testing::Message() << "M=" << t.M << " N=" << t.N << " K=" << t.K
                                    << " tA=" << t.transpose_a << " tB=" << t.transpose_b
                                    << " alpha=" << t.alpha << " beta=" << t.beta
                                    << " c_padding=" << t.c_padding);
  const Problem p(t, seed);
  const std::vector<float> want = p.run_f32(&Operand::widened);
  const double relative = 2.0 * double(t.K + 3) * kUnitRoundoffF32;
  for (GemmBf16Path path : available_paths()) {
    SCOPED_TRACE(lockstep::cpu::gemm_bf16_path_name(path));
    p.expect_close(p.run(path), want, relative);
  }
}

// Whether /proc/cpuinfo's flags list `flag` (false where there is no such file).
bool cpu_lists(const std::string& flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0 && (line + " ").find(" " + flag + " ") != std::string::npos) return true;
  return false;
}

TEST(GemmBf16, TakesTheFastestPathTheCpuLists) {
  const std::string path = lockstep::cpu::gemm_bf16_path();
  EXPECT_TRUE(path == "amx_bf16" || path == "avx512_bf16" || path == "f32 fallback") << path;
  EXPECT_TRUE(lockstep::cpu::gemm_bf16_path_available(GemmBf16Path::f32_fallback));
#if defined(__linux__) && defined(__x86_64__)
  // Where Linux lists the instructions, their path is available and the fastest one is taken.
  if (cpu_lists("avx512_bf16")) {
    EXPECT_TRUE(lockstep::cpu::gemm_bf16_path_available(GemmBf16Path::avx512_bf16));
    if (!cpu_lists("amx_bf16")) {
      EXPECT_EQ(path, "avx512_bf16");
    }
  }
  if (cpu_lists("amx_bf16") && cpu_lists("amx_tile")) {
    EXPECT_TRUE(lockstep::cpu::gemm_bf16_path_available(GemmBf16Path::amx_bf16));
    EXPECT_EQ(path, "amx_bf16");
  }
#endif
}

TEST(GemmBf16, APathTheCpuLacksIsRefusedByName) {
  for (GemmBf16Path path : {GemmBf16Path::amx_bf16, GemmBf16Path::avx512_bf16}) {
    if (lockstep::cpu::gemm_bf16_path_available(path)) continue;
    float c = 0.0f;
    const BFloat16 one(1.0f);
    try {
      lockstep::cpu::gemm_bf16_on(path, 1, 1, 1, 1.0f, &one, 1, 1, &one, 1, 1, 0.0f, &c, 1);
      ADD_FAILURE() << "expected an error for " << lockstep::cpu::gemm_bf16_path_name(path);
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(lockstep::cpu::gemm_bf16_path_name(path)), std::string::npos)
          << e.what();
    }
  }
}

TEST(GemmBf16, OneByOneByOne) { check({1, 1, 1}); }

TEST(GemmBf16, KOfOne) {
  check({7, 13, 1});
  check({150, 270, 1});
}

// An odd K leaves the last pair half empty; 257 and 513 also split K into slices.
TEST(GemmBf16, OddK) {
  check({7, 13, 5});
  check({37, 129, 65});
  check({150, 270, 257});
  check({64, 96, 513, true, true});
}

// M and N that are not multiples of the 8 x 32 tile, and narrow products computed as C^T.
TEST(GemmBf16, EdgeTiles) {
  check({37, 129, 64});
  check({200, 3, 301});
  check({3, 200, 301});
  check({1, 517, 300});
  check({517, 1, 300});
  check({32, 9, 676, false, true, 1.0f, 1.0f});  // a convolution's weight gradient
}

// Around the AMX kernel's 16 x 16 tiles, its 32 x 32 blocks and its 32 k values per step: blocks
// that need one, two or four tiles, and K padded with zero pairs.
TEST(GemmBf16, EdgesOfTheTiles) {
  for (int64_t m : {15, 16, 17, 33})
    for (int64_t n : {16, 17, 31})
      for (int64_t k : {31, 32, 33}) check({m, n, k, m == 17, n == 31});
}

// Larger than MC (192), KC (256 and 512) and NC (4064), with ragged edges.
TEST(GemmBf16, LargerThanEveryBlock) {
  check({201, 4100, 263});
  check({37, 129, 1100});
}

TEST(GemmBf16, TransposedOperands) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check({37, 129, 65, ta, tb});
      check({150, 270, 300, ta, tb});
    }
}

TEST(GemmBf16, RowStrideOfCLargerThanN) {
  check({37, 129, 65, false, false, 1.0f, 0.0f, 7});
  check({150, 270, 300, true, false, 1.0f, 1.0f, 33});
}

TEST(GemmBf16, AlphaScalesTheProduct) {
  check({37, 129, 65, false, false, -2.5f, 0.0f});
  check({150, 270, 300, false, true, 0.5f, 0.0f});
}

TEST(GemmBf16, BetaZeroNeverReadsNaNFromC) {
  check({7, 13, 5, false, false, 1.0f, 0.0f});
  check({150, 270, 300, false, false, 1.0f, 0.0f});
}

TEST(GemmBf16, BetaAccumulates) {
  check({7, 13, 5, false, false, 1.0f, 1.0f});
  check({150, 270, 300, false, false, 1.0f, 0.5f});
  check({150, 270, 300, true, true, -1.5f, 0.75f, 5});
}

TEST(GemmBf16, EmptyKScalesC) {
  check({5, 6, 0, false, false, 1.0f, 0.5f});
  check({5, 6, 0, false, false, 1.0f, 0.0f});  // C becomes zero, NaN is overwritten
}

// What bf16 costs against f32 on the unrounded values: rounding each input to bf16 changes it
// by at most 2^-8 of itself, so each product by at most 2 * 2^-8 + 2^-16 of itself, on top of
// the f32 sums' 2 (K + 3) u.
TEST(GemmBf16, WithinBf16RoundingOfTheF32Product) {
  for (const Case& t : {Case{37, 129, 65}, Case{150, 270, 300, true, false, 1.0f, 0.5f}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << t.M << " N=" << t.N << " K=" << t.K);
    const Problem p(t, 99);
    const double relative = 2 * kUnitRoundoffBf16 + kUnitRoundoffBf16 * kUnitRoundoffBf16 +
                            2.0 * double(t.K + 3) * kUnitRoundoffF32;
    // magnitude() is on the bf16 values; on the exact ones it is at most 1 / (1 - 2^-8)^2 times
    // larger.
    const double unrounded = 1.0 / ((1 - kUnitRoundoffBf16) * (1 - kUnitRoundoffBf16));
    for (GemmBf16Path path : available_paths()) {
      SCOPED_TRACE(lockstep::cpu::gemm_bf16_path_name(path));
      p.expect_close(p.run(path), p.run_f32(&Operand::exact), relative * unrounded);
    }
  }
}

#ifdef _OPENMP
// The same bits with any number of threads (the row blocks differ, the sums do not), on every
// path, for a product large enough to be shared.
TEST(GemmBf16, SameBitsWithAnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (const Case& t : {Case{301, 270, 517, false, true, 1.0f, 0.5f, 3}, Case{9, 700, 300}}) {
    const Problem p(t, 7);
    for (GemmBf16Path path : available_paths()) {
      SCOPED_TRACE(lockstep::cpu::gemm_bf16_path_name(path));
      omp_set_num_threads(1);
      const std::vector<float> one = p.run(path);
      for (int threads : {2, 3}) {
        omp_set_num_threads(threads);
        const std::vector<float> more = p.run(path);
        EXPECT_EQ(std::memcmp(one.data(), more.data(), one.size() * sizeof(float)), 0)
            << threads << " threads changed the result";
      }
    }
  }
  omp_set_num_threads(saved);
}
#endif

}  // namespace

namespace {

// A packed once (pack_gemm_bf16_a) gives gemm_bf16's results bit for bit: products of every
// shape the convolutions make, one narrow enough to be computed as C^T, K over several slices,
// a transposed A (the input gradient's W^T), with alpha and beta, on 1 and 2 threads.
TEST(GemmBf16, APackedOnceGivesTheSameBitsAsPackingItEveryTime) {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
#endif
  for (const Case& t : {Case{64, 121, 288}, Case{288, 121, 64, true}, Case{64, 3, 300}, Case{37, 129, 1100},
                        Case{150, 270, 300, false, true, -1.5f, 0.75f, 5}, Case{7, 13, 5}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << t.M << " N=" << t.N << " K=" << t.K << " tA=" << t.transpose_a);
    const Problem p(t, 17);
    const lockstep::cpu::PackedBf16A packed =
        lockstep::cpu::pack_gemm_bf16_a(t.M, t.K, p.a.bf16.data(), p.a.row_stride, p.a.col_stride);
    for (int threads : {1, 2}) {
#ifdef _OPENMP
      omp_set_num_threads(threads);
#endif
      std::vector<float> want = p.c, got = p.c;
      lockstep::cpu::gemm_bf16(t.M, t.N, t.K, t.alpha, p.a.bf16.data(), p.a.row_stride, p.a.col_stride,
                               p.b.bf16.data(), p.b.row_stride, p.b.col_stride, t.beta, want.data(), p.ldc);
      lockstep::cpu::gemm_bf16_packed_a(packed, t.N, t.alpha, p.b.bf16.data(), p.b.row_stride, p.b.col_stride,
                                        t.beta, got.data(), p.ldc);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << threads << " thread(s)";
    }
  }
#ifdef _OPENMP
  omp_set_num_threads(saved);
#endif
}

}  // namespace
