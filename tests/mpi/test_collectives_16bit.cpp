// The MPI backend's collectives of f16 and bf16 tensors. MPI has no 16-bit float: the tensors
// travel as their bytes, and Lockstep's own reduction ops add (or compare) each pair of
// elements in float and round the result to 16 bits once. The values are chosen so that every
// order in which MPI may pair the ranks gives the same result, which the tests compute here:
// the float sum of the ranks' values, rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mpi_test_util.h"

namespace lockstep {
namespace {

using test::group;

// The 16-bit value of `dtype` nearest to `v` (round to nearest even), as a float.
float round16(DType dtype, float v) {
  return dtype == DType::f16 ? static_cast<float>(Half(v)) : static_cast<float>(BFloat16(v));
}

// Rank r's values, 16-bit numbers held as floats, by the element's index i:
//   i % 4 == 0, 1: small integers times a power of two, so every partial sum is exact;
//   i % 4 == 2:    on ranks 0 and 1 two random numbers whose sum must round (and every 40th
//                  element 40000 twice: beyond f16's 65504, not bf16's), 0 on the other ranks,
//                  so that the one inexact addition is the same in any order;
//   i % 4 == 3:    on rank 1 alone +inf, NaN, or -inf against +inf on rank 0 (a NaN sum).
std::vector<float> rank_values(DType dtype, int64_t n, int rank) {
  const float inf = std::numeric_limits<float>::infinity();
  Generator gen(7 + rank);
  const std::vector<double> random = randn({n}, {}, &gen).to_vector<double>();
  std::vector<float> v(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0:
      case 1: v[i] = std::ldexp(static_cast<float>((rank + 1) * (i % 7 - 3)), static_cast<int>(i % 9) - 4); break;
      case 2:
        if (rank < 2) {
          v[i] = i % 40 == 2 ? 40000.0f : std::ldexp(static_cast<float>(random[i]), -rank * static_cast<int>(i % 6));
        }
        break;
      default:
        if (rank == 1) v[i] = i % 12 == 3 ? inf : i % 12 == 7 ? std::numeric_limits<float>::quiet_NaN() : -inf;
        if (rank == 0 && i % 12 == 11) v[i] = inf;
    }
    v[i] = round16(dtype, v[i]);
  }
  return v;
}

Tensor rank_tensor(DType dtype, int64_t n, int rank) {
  const std::vector<float> v = rank_values(dtype, n, rank);
  return from_vector(std::vector<double>(v.begin(), v.end()), {n}, TensorOptions().dtype(dtype));
}

// The float sum over all ranks, element by element (exact, or the one inexact addition).
std::vector<float> float_sum(DType dtype, int64_t n) {
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < group().size(); ++r) {
    const std::vector<float> v = rank_values(dtype, n, r);
    for (int64_t i = 0; i < n; ++i) sum[i] += v[i];
  }
  return sum;
}

// Equal values, or both NaN.
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// The 16-bit patterns of an f16 or bf16 CPU tensor.
std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[i] = t.dtype() == DType::f16 ? t.data_ptr<Half>()[i].bits : t.data_ptr<BFloat16>()[i].bits;
  }
  return out;
}

// Expects `t` to hold the same bits on every rank (NaNs included), gathered as 16-bit tensors.
void expect_same_bits_on_every_rank(const Tensor& t) {
  const int world = group().size();
  const int64_t n = t.numel();
  const Tensor all = empty({world * n}, t.options());
  group().all_gather(all, t);
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(bits(all.slice(0, r * n, (r + 1) * n).contiguous()), bits(all.slice(0, 0, n).contiguous()))
        << "rank " << r << " differs from rank 0";
  }
}

struct Case {
  DType dtype;
  int64_t n;
};

class Collectives16Bit : public testing::TestWithParam<Case> {};

TEST_P(Collectives16Bit, AllReduceSumIsTheFloatSumRoundedOnce) {
  const auto [dtype, n] = GetParam();
  const Tensor t = rank_tensor(dtype, n, group().rank());
  group().all_reduce(t, ReduceOp::Sum);
  const std::vector<double> got = t.to_vector<double>();
  const std::vector<float> sum = float_sum(dtype, n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(static_cast<float>(got[i]), round16(dtype, sum[i])))
        << "element " << i << ": got " << got[i] << ", expected " << round16(dtype, sum[i]) << " (the float sum "
        << sum[i] << " rounded to " << dtype_name(dtype) << ")";
  }
  if (n > 7) {
    EXPECT_EQ(std::isinf(got[2]), dtype == DType::f16) << "40000 + 40000 is beyond f16's 65504, not bf16's range";
    EXPECT_TRUE(std::isinf(got[3]) && got[3] > 0) << "a rank's inf is every rank's inf";
    EXPECT_TRUE(std::isnan(got[7])) << "a rank's NaN is every rank's NaN";
  }
  expect_same_bits_on_every_rank(t);
}

// The average is the 16-bit sum divided by the world size in float, rounded once more.
TEST_P(Collectives16Bit, AllReduceAvgIsTheSumDividedAndRounded) {
  const auto [dtype, n] = GetParam();
  const int world = group().size();
  const Tensor t = rank_tensor(dtype, n, group().rank());
  group().all_reduce(t, ReduceOp::Avg);
  const std::vector<double> got = t.to_vector<double>();
  const std::vector<float> sum = float_sum(dtype, n);
  for (int64_t i = 0; i < n; ++i) {
    const float want = round16(dtype, round16(dtype, sum[i]) / static_cast<float>(world));
    ASSERT_TRUE(same(static_cast<float>(got[i]), want))
        << "element " << i << ": got " << got[i] << ", expected " << want;
  }
  expect_same_bits_on_every_rank(t);
}

// The maximum of 16-bit numbers is exact; a NaN on any rank wins.
TEST_P(Collectives16Bit, AllReduceMaxLetsNaNWin) {
  const auto [dtype, n] = GetParam();
  const Tensor t = rank_tensor(dtype, n, group().rank());
  group().all_reduce(t, ReduceOp::Max);
  const std::vector<double> got = t.to_vector<double>();
  std::vector<float> want = rank_values(dtype, n, 0);
  for (int r = 1; r < group().size(); ++r) {
    const std::vector<float> v = rank_values(dtype, n, r);
    for (int64_t i = 0; i < n; ++i) want[i] = std::isnan(want[i]) || want[i] > v[i] ? want[i] : v[i];
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(static_cast<float>(got[i]), want[i]))
        << "element " << i << ": got " << got[i] << ", expected " << want[i];
  }
}

// Each rank's slice of the reduction is the sum's slice.
TEST_P(Collectives16Bit, ReduceScatterGivesEachRankItsSliceOfTheSum) {
  const auto [dtype, n] = GetParam();
  const int world = group().size(), me = group().rank();
  const Tensor out = zeros({n}, TensorOptions().dtype(dtype));
  group().reduce_scatter(out, rank_tensor(dtype, world * n, me), ReduceOp::Sum);
  const std::vector<double> got = out.to_vector<double>();
  const std::vector<float> sum = float_sum(dtype, world * n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(static_cast<float>(got[i]), round16(dtype, sum[me * n + i]))) << "element " << i;
  }
}

// Broadcast and all-gather move the bits as they are, NaNs and infinities included.
TEST_P(Collectives16Bit, BroadcastAndAllGatherMoveTheBitsUnchanged) {
  const auto [dtype, n] = GetParam();
  const int world = group().size(), root = world - 1;
  const Tensor t = rank_tensor(dtype, n, group().rank());
  group().broadcast(t, root);
  EXPECT_EQ(bits(t), bits(rank_tensor(dtype, n, root)));
  const Tensor all = zeros({world * n}, TensorOptions().dtype(dtype));
  group().all_gather(all, rank_tensor(dtype, n, group().rank()));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(bits(all.slice(0, r * n, (r + 1) * n).contiguous()), bits(rank_tensor(dtype, n, r)))
        << "slice of rank " << r;
  }
}

// 2^20 + 3 elements: 2 MiB in 16 bits, which MPI splits into pieces its algorithm reduces apart.
INSTANTIATE_TEST_SUITE_P(DTypesAndSizes, Collectives16Bit,
                         testing::Values(Case{DType::f16, 0}, Case{DType::f16, 1}, Case{DType::f16, 41},
                                         Case{DType::f16, (1 << 20) + 3}, Case{DType::bf16, 0}, Case{DType::bf16, 1},
                                         Case{DType::bf16, 41}, Case{DType::bf16, (1 << 20) + 3}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return dtype_name(info.param.dtype) + "_" + std::to_string(info.param.n);
                         });

}  // namespace
}  // namespace lockstep
