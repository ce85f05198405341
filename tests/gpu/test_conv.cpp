// conv2d on the GPU (im2col / col2im kernels + GPU GEMM) against the CPU, forward and backward
// (input, weight and bias gradients), with both GEMM backends and f32 and f64: 1x1, 3x3, 5x5
// and non-square kernels, stride 1, 2 and 3, padding 0, 1 and 2, odd sizes, with and without
// bias, a non-contiguous input, an empty batch, and a batch large enough to be split into chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "gpu_test_util.h"
#include "lockstep.h"
#include "tensor/ops/cuda/gemm.h"

using namespace lockstep;
using namespace lockstep::test;
using cuda::GemmBackend;

namespace {

// One convolution: input (batch, in, height, width), weight (out, in, kernel_h, kernel_w).
struct Conv {
  int64_t batch, in, height, width, out, kernel_h, kernel_w, stride, padding;
  bool bias;

  int64_t out_h() const { return (height + 2 * padding - kernel_h) / stride + 1; }
  int64_t out_w() const { return (width + 2 * padding - kernel_w) / stride + 1; }
  // The longest sum: the forward over a patch, dx over C_out * kH * kW, dW and the bias
  // gradient over every output pixel of the batch.
  int64_t terms() const {
    return std::max({in * kernel_h * kernel_w, out * kernel_h * kernel_w, batch * out_h() * out_w()});
  }
  std::string str() const {
    return "x(" + std::to_string(batch) + "," + std::to_string(in) + "," + std::to_string(height) + "," +
           std::to_string(width) + ") w(" + std::to_string(out) + "," + std::to_string(in) + "," +
           std::to_string(kernel_h) + "," + std::to_string(kernel_w) + ") stride " + std::to_string(stride) +
           " padding " + std::to_string(padding) + (bias ? " bias" : " no bias");
  }
};

const Conv kConvs[] = {
    {2, 3, 7, 9, 4, 3, 3, 1, 1, true},    // 3x3, "same" padding
    {2, 3, 7, 9, 4, 3, 3, 2, 0, false},   // 3x3, stride 2, no padding
    {3, 2, 8, 8, 5, 1, 1, 1, 0, true},    // 1x1
    {2, 3, 9, 9, 2, 1, 1, 3, 0, false},   // 1x1, stride 3: pixels no patch reads get gradient 0
    {1, 4, 11, 10, 3, 5, 5, 2, 2, true},  // 5x5, stride 2, padding 2
    {2, 1, 5, 5, 2, 5, 5, 1, 2, false},   // 5x5 over a 5x5 image, padding 2
    {3, 5, 6, 7, 6, 3, 3, 2, 1, true},    // odd sizes, stride 2, padding 1
    {2, 2, 3, 3, 3, 5, 5, 1, 1, true},    // the kernel fills the padded input: one output pixel
    {2, 3, 6, 8, 4, 3, 1, 1, 1, true},    // non-square 3x1 kernel
    {1, 1, 1, 1, 1, 1, 1, 1, 0, true},    // one pixel
};

// Checks conv2d for `c` on the GPU against the CPU, every input requiring grad. `layout`
// turns the stored input into the (N, C, H, W) tensor convolved (a view, taken on the device).
void check(const Conv& c, DType dtype, uint64_t seed, const std::string& what,
           const std::function<Tensor(const Tensor&)>& layout, const Shape& stored_shape) {
  const Shape weight_shape = {c.out, c.in, c.kernel_h, c.kernel_w};
  std::vector<Tensor> inputs = {random_cpu(stored_shape, seed, dtype).requires_grad_(true),
                                random_cpu(weight_shape, seed + 1, dtype).requires_grad_(true)};
  if (c.bias) inputs.push_back(random_cpu({c.out}, seed + 2, dtype).requires_grad_(true));
  expect_parity(
      [&c, &layout](const std::vector<Tensor>& in) {
        return conv2d(layout(in[0]), in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding);
      },
      inputs, rtol(dtype, c.terms()), atol(dtype, c.terms()), what + " " + c.str());
}

Tensor as_is(const Tensor& x) { return x; }

}  // namespace

TEST(GpuConv, EveryKernelStrideAndPadding) {
  for_each_setting([](DType dtype, const std::string& setting) {
    uint64_t seed = 200;
    for (const Conv& c : kConvs) {
      check(c, dtype, seed += 3, setting, as_is, {c.batch, c.in, c.height, c.width});
    }
  });
}

TEST(GpuConv, ChannelsLastInput) {
  // The input stored as (N, H, W, C) and convolved as (N, C, H, W): conv2d makes it
  // contiguous on the device first.
  for_each_setting([](DType dtype, const std::string& setting) {
    const Conv c{2, 3, 7, 9, 4, 3, 3, 1, 1, true};
    check(c, dtype, 301, setting + " channels-last", [](const Tensor& x) { return x.permute({0, 3, 1, 2}); },
          {c.batch, c.height, c.width, c.in});
  });
}

TEST(GpuConv, EmptyBatch) {
  // No images: an empty output, and a weight gradient of zeros.
  for_each_setting([](DType dtype, const std::string& setting) {
    const Conv c{0, 3, 5, 5, 4, 3, 3, 1, 1, true};
    check(c, dtype, 401, setting + " empty batch", as_is, {c.batch, c.in, c.height, c.width});
  });
}

TEST(GpuConv, BatchSplitIntoChunks) {
  // The GPU unfolds at most 64 MiB of im2col matrix at a time. Here one image's matrix is
  // (16*3*3) x (64*64) values, 2.4 MB in f32 and 4.7 MB in f64, so 30 images take 2 chunks
  // in f32 and 3 in f64, and the weight gradient is summed across chunks.
  for_each_setting([](DType dtype, const std::string& setting) {
    const Conv c{30, 16, 64, 64, 4, 3, 3, 1, 1, true};
    check(c, dtype, 501, setting + " chunked", as_is, {c.batch, c.in, c.height, c.width});
  });
}
