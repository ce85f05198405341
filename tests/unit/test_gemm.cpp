// Tests for the CPU GEMM (src/tensor/ops/cpu/gemm.cpp) against a naive triple loop.
//
// Tolerance: both sides sum K products in a different order (the blocked GEMM splits K
// into KC slices and uses FMA), so the rounding differences grow like sqrt(K) for random
// inputs. We compare |got - want| <= tol * sqrt(K) * (sum_k |alpha A(i,k) B(k,j)| +
// |beta C(i,j)|), i.e. relative to the magnitude of the terms that were added, with tol
// 1e-5 for float (a few ulps, 2^-24 = 6e-8, times headroom) and 1e-13 for double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/ops/cpu/gemm.h"

namespace {

template <class T>
T tolerance();
template <>
float tolerance<float>() { return 1e-5f; }
template <>
double tolerance<double>() { return 1e-13; }

// A strided matrix view over a buffer, enough to describe each operand of a test.
template <class T>
struct Operand {
  std::vector<T> data;
  int64_t row_stride;
  int64_t col_stride;
  T at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// A rows x cols matrix of random non-zero values in [-1, -0.1] U [0.1, 1]. With
// `transposed` the buffer holds it column-major (the transpose of a row-major cols x rows
// matrix), which is how a caller passes A^T or B^T.
template <class T>
Operand<T> random_matrix(int64_t rows, int64_t cols, bool transposed, std::mt19937& rng) {
  std::uniform_real_distribution<double> magnitude(0.1, 1.0);
  std::bernoulli_distribution negative(0.5);
  Operand<T> m{std::vector<T>(rows * cols), transposed ? 1 : cols, transposed ? rows : 1};
  for (T& x : m.data) x = static_cast<T>(negative(rng) ? -magnitude(rng) : magnitude(rng));
  return m;
}

// One GEMM call to check, described by its shape and options.
struct Case {
  int64_t M, N, K;
  bool transpose_a = false;
  bool transpose_b = false;
  double alpha = 1.0;
  double beta = 0.0;
  int64_t c_padding = 0;  // c_row_stride = N + c_padding
};

// Runs lockstep::cpu::gemm on `c` and checks every element against the naive loop. With
// beta == 0, C starts as NaN everywhere, so any read of it would show up as NaN.
template <class T>
void check(const Case& t, uint32_t seed = 1234) {
  SCOPED_TRACE(::testing::Message()
               << "M=" << t.M << " N=" << t.N << " K=" << t.K << " tA=" << t.transpose_a
               << " tB=" << t.transpose_b << " alpha=" << t.alpha << " beta=" << t.beta
               << " c_padding=" << t.c_padding);
  std::mt19937 rng(seed);
  const Operand<T> a = random_matrix<T>(t.M, t.K, t.transpose_a, rng);
  const Operand<T> b = random_matrix<T>(t.K, t.N, t.transpose_b, rng);
  const int64_t ldc = t.N + t.c_padding;
  const T alpha = static_cast<T>(t.alpha), beta = static_cast<T>(t.beta);

  // C: random where it is an input, NaN where it is write-only, and the padding columns
  // past N hold a sentinel that must survive untouched.
  const T sentinel = T(-12345);
  Operand<T> c = random_matrix<T>(t.M, ldc, false, rng);
  for (int64_t i = 0; i < t.M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      T& x = c.data[i * ldc + j];
      if (j >= t.N) x = sentinel;
      else if (beta == T(0)) x = std::numeric_limits<T>::quiet_NaN();
    }
  const std::vector<T> c_before = c.data;

  lockstep::cpu::gemm<T>(t.M, t.N, t.K, alpha, a.data.data(), a.row_stride, a.col_stride,
                         b.data.data(), b.row_stride, b.col_stride, beta, c.data.data(), ldc);

  const double tol = tolerance<T>() * std::sqrt(static_cast<double>(std::max<int64_t>(t.K, 1)));
  int64_t failures = 0;
  for (int64_t i = 0; i < t.M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = c.data[i * ldc + j];
      if (j >= t.N) {
        ASSERT_EQ(got, sentinel) << "padding of C overwritten at (" << i << ", " << j << ")";
        continue;
      }
      // The reference, in double, and the size of what was summed.
      double want = 0, scale = 0;
      for (int64_t k = 0; k < t.K; ++k) {
        const double term = t.alpha * double(a.at(i, k)) * double(b.at(k, j));
        want += term;
        scale += std::abs(term);
      }
      if (beta != T(0)) {
        want += t.beta * double(c_before[i * ldc + j]);
        scale += std::abs(t.beta * double(c_before[i * ldc + j]));
      }
      const bool ok = std::isfinite(got) && std::abs(got - want) <= tol * scale;
      // Report only the first few mismatches so a broken kernel gives a readable log.
      if (!ok && ++failures <= 5)
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", want " << want;
    }
  }
  EXPECT_EQ(failures, 0);
}

// Runs every case for both element types.
void check_both(const Case& t) {
  check<float>(t);
  check<double>(t);
}

TEST(Gemm, OneByOneByOne) { check_both({1, 1, 1}); }

TEST(Gemm, OddSizes) {
  check_both({7, 13, 5});
  check_both({37, 129, 65});
  check_both({200, 3, 301});
  check_both({3, 200, 301});
  check_both({1, 517, 300});
  check_both({517, 1, 300});
}

// Products much narrower than a tile are computed as C^T = B^T A^T, with C written
// transposed: with every combination of operand layouts, beta, and padding of C.
TEST(Gemm, NarrowProductsComputedTransposed) {
  check_both({32, 9, 676, false, true, 1.0, 1.0});   // a convolution's weight gradient
  check_both({200, 3, 301, true, false, -2.0, 0.5, 5});
  check_both({517, 1, 300, true, true, 1.0, 0.0, 3});
  check_both({64, 10, 128, false, true, 1.0, 0.0});  // a linear layer's forward with 10 outputs
}

// Larger than MC (144 / 72), KC (256) and NC (4064) in every dimension, with ragged edges
// everywhere, so every loop of the blocked algorithm takes more than one trip.
TEST(Gemm, LargerThanEveryBlock) { check_both({151, 4100, 263}); }

TEST(Gemm, TransposedOperands) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Case small{37, 129, 65, ta, tb};
      Case large{150, 270, 300, ta, tb};
      check_both(small);
      check_both(large);
    }
}

TEST(Gemm, RowStrideOfCLargerThanN) {
  check_both({37, 129, 65, false, false, 1.0, 0.0, 7});
  check_both({150, 270, 300, true, false, 1.0, 1.0, 33});
}

TEST(Gemm, AlphaScalesTheProduct) {
  check_both({37, 129, 65, false, false, -2.5, 0.0});
  check_both({150, 270, 300, false, true, 0.5, 0.0});
}

TEST(Gemm, BetaZeroNeverReadsNaNFromC) {
  // check() fills C with NaN whenever beta == 0; cover both code paths.
  check_both({7, 13, 5, false, false, 1.0, 0.0});
  check_both({150, 270, 300, false, false, 1.0, 0.0});
}

TEST(Gemm, BetaOneAccumulates) {
  check_both({7, 13, 5, false, false, 1.0, 1.0});
  check_both({150, 270, 300, false, false, 1.0, 1.0});
  check_both({150, 270, 300, true, true, -1.5, 0.75, 5});
}

TEST(Gemm, EmptyKScalesC) {
  check_both({5, 6, 0, false, false, 1.0, 0.5});
  check_both({5, 6, 0, false, false, 1.0, 0.0});  // C becomes zero, NaN is overwritten
}

TEST(Gemm, EmptyMOrNTouchesNothing) {
  float c = 3.0f;
  const float a = 1.0f, b = 1.0f;
  lockstep::cpu::gemm<float>(0, 1, 1, 1.0f, &a, 1, 1, &b, 1, 1, 0.0f, &c, 1);
  lockstep::cpu::gemm<float>(1, 0, 1, 1.0f, &a, 1, 1, &b, 1, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 3.0f);
}

// gemm_packed_a with A packed once must give gemm's bits, whichever path gemm takes: the
// small-problem loop, the blocked one (one and several K slices, M not a multiple of the
// register tile), and C^T = B^T A^T; for a strided A, a transposed one, and beta 0 and 1.
template <class T>
void check_packed_a_matches_gemm(const Case& t) {
  SCOPED_TRACE(::testing::Message() << "M=" << t.M << " N=" << t.N << " K=" << t.K << " tA=" << t.transpose_a
                                    << " beta=" << t.beta);
  std::mt19937 rng(99);
  const Operand<T> a = random_matrix<T>(t.M, t.K, t.transpose_a, rng);
  const Operand<T> b = random_matrix<T>(t.K, t.N, t.transpose_b, rng);
  const Operand<T> c0 = random_matrix<T>(t.M, t.N, false, rng);
  std::vector<T> want = c0.data, got = c0.data;
  const T beta = static_cast<T>(t.beta);
  lockstep::cpu::gemm<T>(t.M, t.N, t.K, T(1), a.data.data(), a.row_stride, a.col_stride, b.data.data(),
                         b.row_stride, b.col_stride, beta, want.data(), t.N);
  const lockstep::cpu::PackedGemmA<T> packed =
      lockstep::cpu::pack_gemm_a<T>(t.M, t.K, a.data.data(), a.row_stride, a.col_stride);
  // Twice: the panels are only read.
  for (int round = 0; round < 2; ++round) {
    got = c0.data;
    lockstep::cpu::gemm_packed_a<T>(packed, t.N, T(1), b.data.data(), b.row_stride, b.col_stride, beta,
                                    got.data(), t.N);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(Gemm, PackedAGivesTheSameBits) {
  for (const Case& t : {Case{5, 6, 7}, Case{64, 121, 288}, Case{64, 121, 288, false, false, 1.0, 1.0},
                        Case{288, 121, 64, true}, Case{67, 33, 700, false, true, 1.0, 1.0}, Case{32, 9, 676}}) {
    check_packed_a_matches_gemm<float>(t);
    check_packed_a_matches_gemm<double>(t);
  }
}

// A product with a tiny K (a first convolution's forward pass, K = 9) or at most one vector of
// columns (its weight gradient, N = 9), with B's rows contiguous, is computed without packing
// (gemm.cpp's unpacked path). Its answer must be right, and the same bits as the packed path,
// which the same product takes when B is stored column by column.
template <class T>
void check_unpacked_matches_packed(const Case& t) {
  SCOPED_TRACE(::testing::Message() << "M=" << t.M << " N=" << t.N << " K=" << t.K << " alpha=" << t.alpha
                                    << " beta=" << t.beta);
  std::mt19937 rng(7);
  const Operand<T> a = random_matrix<T>(t.M, t.K, t.transpose_a, rng);
  const Operand<T> b_rows = random_matrix<T>(t.K, t.N, false, rng);
  Operand<T> b_columns{std::vector<T>(t.K * t.N), 1, t.K};
  for (int64_t k = 0; k < t.K; ++k)
    for (int64_t j = 0; j < t.N; ++j) b_columns.data[k + j * t.K] = b_rows.at(k, j);
  const Operand<T> c = random_matrix<T>(t.M, t.N, false, rng);
  std::vector<T> unpacked = c.data, packed = c.data;
  const T alpha = static_cast<T>(t.alpha), beta = static_cast<T>(t.beta);
  lockstep::cpu::gemm<T>(t.M, t.N, t.K, alpha, a.data.data(), a.row_stride, a.col_stride, b_rows.data.data(),
                         b_rows.row_stride, b_rows.col_stride, beta, unpacked.data(), t.N);
  lockstep::cpu::gemm<T>(t.M, t.N, t.K, alpha, a.data.data(), a.row_stride, a.col_stride, b_columns.data.data(),
                         b_columns.row_stride, b_columns.col_stride, beta, packed.data(), t.N);
  int64_t differ = 0;
  for (size_t e = 0; e < packed.size(); ++e) differ += std::memcmp(&unpacked[e], &packed[e], sizeof(T)) != 0;
  EXPECT_EQ(differ, 0) << "elements whose bits differ between the two paths";
}

TEST(Gemm, UnpackedPathGivesTheBitsOfThePackedOne) {
  const std::vector<Case> cases{
      {32, 676, 9, false, false, 1.0, 1.0},   // a first convolution's forward pass onto its bias
      {32, 9, 676, false, false, 1.0, 1.0},   // its weight gradient, accumulated
      {37, 13, 700, true, false, -2.0, 0.5},  // K in three slices, ragged rows, A transposed
      {64, 40, 13, false, false, 1.0, 0.0},   // two column tiles, the second partly masked
  };
  for (const Case& t : cases) {
    check_both(t);
    check_unpacked_matches_packed<float>(t);
    check_unpacked_matches_packed<double>(t);
  }
}

#ifdef _OPENMP
// The result must not depend on how many threads share the work (the row blocks are split
// differently for each count), and every count must give the right answer.
TEST(Gemm, AnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 5}) {
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    omp_set_num_threads(threads);
    check_both({301, 270, 517, false, true, 1.0, 0.5, 3});
  }
  omp_set_num_threads(saved);
}
#endif

}  // namespace
