// Tests for the library's flop count (src/core/flop_count.h): what each op adds, against counts
// made by hand, and a whole model's against an independent count (chapter 2's CNN here, ResNet-50
// against its paper's figure in test_models.cpp).
#include <gtest/gtest.h>

#include <cstdint>

#include "core/flop_count.h"
#include "lockstep.h"
#include "nn/models.h"
#include "nn/module.h"

namespace {

using namespace lockstep;

// The flops that `work` adds to the count.
template <class Work>
int64_t flops_of(Work work) {
  const int64_t before = flops_counted();
  work();
  return flops_counted() - before;
}

TEST(FlopCount, AMatmulIsTwoFlopsPerMultiplyAdd) {
  EXPECT_EQ(flops_of([] { matmul(rand({3, 4}), rand({4, 5})); }), 2 * 3 * 4 * 5);
  // A batch of 2 x 6 products of (3, 4) by (4, 5), b broadcast over the batch.
  EXPECT_EQ(flops_of([] { matmul(rand({2, 6, 3, 4}), rand({4, 5})); }), 2 * 6 * 2 * 3 * 4 * 5);
}

TEST(FlopCount, ALinearLayersBackwardCountsEachGradientItComputes) {
  const Tensor x = rand({8, 16}), w = rand({32, 16}).requires_grad_(true);
  Tensor y;
  EXPECT_EQ(flops_of([&] { y = linear(x, w); }), 2 * 8 * 16 * 32);
  // Only dW = dY^T X: x needs no gradient. The loss's sum is no product.
  EXPECT_EQ(flops_of([&] { sum(y).backward(); }), 2 * 8 * 16 * 32);
  const Tensor x2 = rand({8, 16}).requires_grad_(true);
  const Tensor y2 = linear(x2, w);
  EXPECT_EQ(flops_of([&] { sum(y2).backward(); }), 2 * (2 * 8 * 16 * 32));
}

TEST(FlopCount, AConvolutionIsOneMultiplyAddPerWeightOfAPatchPerOutputValue) {
  // x: (2, 3, 8, 8), w: (4, 3, 3, 3), padding 1: (2, 4, 8, 8) outputs of 27 multiply-adds each.
  const int64_t forward = 2 * (2 * 4 * 8 * 8) * (3 * 3 * 3);
  const Tensor x = rand({2, 3, 8, 8}).requires_grad_(true), w = rand({4, 3, 3, 3}).requires_grad_(true);
  Tensor y;
  EXPECT_EQ(flops_of([&] { y = conv2d(x, w, Tensor(), 1, 1); }), forward);
  EXPECT_EQ(flops_of([&] { sum(y).backward(); }), 2 * forward);  // dX and dW
  // With stride 2 and no padding: (2, 4, 3, 3) outputs.
  EXPECT_EQ(flops_of([] { conv2d(rand({2, 3, 8, 8}), rand({4, 3, 3, 3}), Tensor(), 2, 0); }),
            2 * (2 * 4 * 3 * 3) * 27);
}

// Chapter 2's CNN, counted layer by layer from its shapes (nn/models.cpp):
//   conv1 1 -> 32, 3x3 on 28x28: 26x26 outputs x 32 channels x 9 weights
//   conv2 32 -> 64, 3x3 on 13x13 (after a 2x2 pool): 11x11 x 64 x 288
//   fc1 1600 -> 128, fc2 128 -> 10.
// Backward computes each layer's weight gradient, and the input gradient of every layer but
// the first (the images need none): a product the size of the forward one each.
TEST(FlopCount, ChapterTwosCnnMatchesACountByHand) {
  const int64_t conv1 = 2 * 26 * 26 * 32 * 9, conv2 = 2 * 11 * 11 * 64 * 288;
  const int64_t fc1 = 2 * 1600 * 128, fc2 = 2 * 128 * 10;
  const int64_t forward = conv1 + conv2 + fc1 + fc2;  // 5,262,080 per image
  const int64_t backward = conv1 + 2 * (conv2 + fc1 + fc2);
  EXPECT_EQ(forward + backward, 15396864);

  auto model = make_model("cnn");
  const int64_t batch = 4;
  const Tensor images = rand({batch, 1, 28, 28});
  const Tensor labels = zeros({batch}, TensorOptions().dtype(DType::i64));
  Tensor loss;
  EXPECT_EQ(flops_of([&] { loss = cross_entropy((*model)(images), labels); }), batch * forward);
  EXPECT_EQ(flops_of([&] { loss.backward(); }), batch * backward);
}

TEST(FlopCount, ReadingsAddUpFromSeveralThreads) {
  const int64_t before = flops_counted();
#pragma omp parallel for num_threads(4)
  for (int i = 0; i < 1000; ++i) count_flops(3);
  EXPECT_EQ(flops_counted() - before, 3000);
}

}  // namespace
