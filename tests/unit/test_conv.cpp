// conv2d: im2col's layout, values against a direct (seven-loop) convolution for many
// stride / padding / kernel combinations, gradients against finite differences, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/flop_count.h"
#include "gradcheck.h"
#include "lockstep.h"
#include "tensor/ops/cpu/conv_dense.h"
#include "tensor/ops/dispatch/conv_kernels.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// The definition of conv2d, written as plainly as possible: for every output pixel, the sum of
// filter x input over the patch, where pixels outside the image (the padding) are 0.
std::vector<double> direct_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
                                  int64_t padding) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t CO = weight.size(0), KH = weight.size(2), KW = weight.size(3);
  const int64_t HO = (H + 2 * padding - KH) / stride + 1, WO = (W + 2 * padding - KW) / stride + 1;
  const std::vector<double> x = input.to_vector<double>(), w = weight.to_vector<double>();
  const std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>(CO, 0.0);
  std::vector<double> y(N * CO * HO * WO);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t oh = 0; oh < HO; ++oh)
        for (int64_t ow = 0; ow < WO; ++ow) {
          double total = b[co];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * stride - padding + i, iw = ow * stride - padding + j;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                total += x[((n * C + c) * H + ih) * W + iw] * w[((co * C + c) * KH + i) * KW + j];
              }
          y[((n * CO + co) * HO + oh) * WO + ow] = total;
        }
  return y;
}

Tensor randn_f32(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, TensorOptions(), &g);
}

// conv2d of random f32 tensors against direct_conv2d.
void check_against_direct(const Shape& input_shape, const Shape& weight_shape, int64_t stride, int64_t padding,
                          bool with_bias) {
  SCOPED_TRACE(shape_str(input_shape) + " * " + shape_str(weight_shape) + " stride " + std::to_string(stride) +
               " padding " + std::to_string(padding) + (with_bias ? " with bias" : ""));
  Tensor x = randn_f32(input_shape, 1), w = randn_f32(weight_shape, 2);
  Tensor b = with_bias ? randn_f32({weight_shape[0]}, 3) : Tensor();
  Tensor y = conv2d(x, w, b, stride, padding);
  const int64_t HO = (input_shape[2] + 2 * padding - weight_shape[2]) / stride + 1;
  const int64_t WO = (input_shape[3] + 2 * padding - weight_shape[3]) / stride + 1;
  ASSERT_EQ(y.shape(), (Shape{input_shape[0], weight_shape[0], HO, WO}));
  const std::vector<double> actual = y.to_vector<double>(), expected = direct_conv2d(x, w, b, stride, padding);
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected[i], 1e-4) << "element " << i;
}

// A convolution's shapes: input (N, C_in, H, W), weight (C_out, C_in, kH, kW), stride, padding.
struct ConvCase {
  Shape input, weight;
  int64_t stride, padding;
};

// The geometry conv2d gives the kernels for these shapes.
Conv2dGeometry geometry_of(const Shape& input, const Shape& weight, int64_t stride, int64_t padding) {
  Conv2dGeometry g;
  g.channels = input[1], g.height = input[2], g.width = input[3];
  g.kernel_h = weight[2], g.kernel_w = weight[3], g.stride = stride, g.padding = padding;
  g.out_h = (g.height + 2 * padding - g.kernel_h) / stride + 1;
  g.out_w = (g.width + 2 * padding - g.kernel_w) / stride + 1;
  return g;
}

// gradcheck of conv2d with respect to input, weight and bias.
bool gradcheck_conv(const Shape& input_shape, const Shape& weight_shape, int64_t stride, int64_t padding) {
  return gradcheck(
      [stride, padding](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], stride, padding); },
      {random_input(input_shape, 4), random_input(weight_shape, 5), random_input({weight_shape[0]}, 6)});
}

}  // namespace

TEST(Conv2d, Im2colLaysOutPatchesAsColumns) {
  // One 3x3 image, a 2x2 filter, stride 1: four patches, one per output pixel.
  //   1 2 3
  //   4 5 6     patch at (0,0) = 1 2 / 4 5, at (0,1) = 2 3 / 5 6, ...
  //   7 8 9
  const std::vector<float> image{1, 2, 3, 4, 5, 6, 7, 8, 9};
  Conv2dGeometry g;
  g.channels = 1;
  g.height = g.width = 3;
  g.kernel_h = g.kernel_w = 2;
  g.out_h = g.out_w = 2;
  std::vector<float> cols(g.patch_size() * g.out_pixels());
  cpu::im2col(image.data(), g, cols.data());
  // Row (i, j) of cols: the filter tap (i, j) at every output pixel; column p: patch p.
  EXPECT_EQ(cols, (std::vector<float>{1, 2, 4, 5,     // tap (0, 0)
                                      2, 3, 5, 6,     // tap (0, 1)
                                      4, 5, 7, 8,     // tap (1, 0)
                                      5, 6, 8, 9}));  // tap (1, 1)
  // col2im adds each entry back where it came from: the centre pixel is in all four patches.
  std::vector<float> back(9, 0.0f);
  cpu::col2im(std::vector<float>(16, 1.0f).data(), g, back.data());
  EXPECT_EQ(back, (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST(Conv2d, Im2colReadsPaddingAsZero) {
  // A 2x2 image with padding 1 and a 3x3 filter, stride 2: output 1x1, the patch is the
  // padded image's top-left 3x3 corner.
  const std::vector<double> image{1, 2, 3, 4};
  Conv2dGeometry g;
  g.channels = 1;
  g.height = g.width = 2;
  g.kernel_h = g.kernel_w = 3;
  g.stride = 2;
  g.padding = 1;
  g.out_h = g.out_w = 1;
  std::vector<double> cols(9, -1.0);
  cpu::im2col(image.data(), g, cols.data());
  EXPECT_EQ(cols, (std::vector<double>{0, 0, 0, 0, 1, 2, 0, 3, 4}));
}

TEST(Conv2d, HandComputed) {
  // A 1x1x3x3 image and a 2x2 filter that adds the top-left and subtracts the bottom-right.
  Tensor x = from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = from_vector({1, 0, 0, -1}, {1, 1, 2, 2});
  Tensor b = from_vector({10}, {1});
  EXPECT_EQ(conv2d(x, w, b).to_vector<double>(), (std::vector<double>{6, 6, 6, 6}));
}

TEST(Conv2d, MatchesDirectConvolution) {
  const std::vector<ConvCase> cases{
      {{2, 3, 7, 7}, {4, 3, 3, 3}, 1, 0},
      {{2, 3, 7, 7}, {4, 3, 3, 3}, 1, 1},
      {{2, 3, 7, 7}, {4, 3, 3, 3}, 2, 1},  // the ResNet downsampling convolution
      {{3, 2, 8, 8}, {5, 2, 2, 2}, 2, 0},
      {{2, 3, 6, 9}, {4, 3, 3, 3}, 2, 1},  // non-square input
      {{2, 3, 7, 10}, {4, 3, 5, 3}, 1, 2}, // non-square kernel, padding 2
      {{1, 3, 9, 7}, {4, 3, 3, 2}, 3, 1},  // stride 3, one image (GEMM threads instead of images)
      {{2, 4, 5, 5}, {6, 4, 1, 1}, 1, 0},  // 1x1 convolution, 25 pixels: images in chunks
      {{2, 4, 6, 6}, {6, 4, 1, 1}, 1, 0},  // 1x1, 36 pixels: the image is its own patches
      {{2, 4, 6, 6}, {6, 4, 1, 1}, 2, 0},  // 1x1 with stride 2: patches copied
      {{2, 1, 4, 4}, {3, 1, 4, 4}, 1, 0},  // the kernel covers the whole image
      {{1, 1, 1, 1}, {2, 1, 3, 3}, 1, 1},  // a one-pixel image inside its padding
  };
  for (const ConvCase& c : cases) {
    check_against_direct(c.input, c.weight, c.stride, c.padding, false);
    check_against_direct(c.input, c.weight, c.stride, c.padding, true);
  }
}

TEST(Conv2d, MatchesDirectConvolutionAtChapter2Shapes) {
  // The CNN's two layers (smaller batch): large enough for gemm's blocked path.
  check_against_direct({4, 1, 28, 28}, {32, 1, 3, 3}, 1, 0, true);
  check_against_direct({4, 32, 13, 13}, {64, 32, 3, 3}, 1, 0, true);
}

// Images of fewer than 32 output pixels go through the GEMMs in chunks of several images side by
// side (conv_kernels.cpp). A batch of 70 such images, not a multiple of any chunk, must give each
// image the output and input gradient it gets alone, and the weight gradient their sum: 1x1
// pixels after a 1x1 filter of stride 1 on 2 x 2 images (chunks of 256 pixels: 64 images), 2x2
// after a stride of 2 (64), 4x4 with padding (16), in f64.
TEST(Conv2d, ChunksOfSmallImagesMatchOneImageAtATime) {
  for (const ConvCase& c : {ConvCase{{70, 5, 2, 2}, {7, 5, 1, 1}, 1, 0},
                            ConvCase{{70, 3, 4, 4}, {4, 3, 3, 3}, 2, 1},
                            ConvCase{{70, 2, 4, 4}, {3, 2, 3, 3}, 1, 1}}) {
    ASSERT_FALSE(cpu::conv2d_runs_dense(geometry_of(c.input, c.weight, c.stride, c.padding)));
    SCOPED_TRACE(shape_str(c.input) + " * " + shape_str(c.weight));
    Tensor x = random_input(c.input, 21), w = random_input(c.weight, 22), b = random_input({c.weight[0]}, 23);
    Tensor y = conv2d(x, w, b, c.stride, c.padding);
    Tensor probe = random_input(y.shape(), 24, /*requires_grad=*/false);  // d(loss)/dy
    sum(y * probe).backward();
    const std::vector<double> dx = x.grad().to_vector<double>(), all_y = y.to_vector<double>();
    std::vector<double> dw_sum(static_cast<size_t>(w.numel()), 0.0);
    const int64_t x_size = x.numel() / 70, y_size = y.numel() / 70;
    for (int64_t n = 0; n < 70; ++n) {
      Tensor xn = x.detach().slice(0, n, n + 1).contiguous().requires_grad_(true);
      Tensor wn = w.detach().clone().requires_grad_(true);
      Tensor yn = conv2d(xn, wn, b.detach(), c.stride, c.padding);
      sum(yn * probe.slice(0, n, n + 1)).backward();
      const std::vector<double> one_y = yn.to_vector<double>(), one_dx = xn.grad().to_vector<double>();
      for (int64_t i = 0; i < y_size; ++i) ASSERT_NEAR(all_y[n * y_size + i], one_y[i], 1e-12) << "image " << n;
      for (int64_t i = 0; i < x_size; ++i) ASSERT_NEAR(dx[n * x_size + i], one_dx[i], 1e-12) << "image " << n;
      const std::vector<double> one_dw = wn.grad().to_vector<double>();
      for (size_t i = 0; i < dw_sum.size(); ++i) dw_sum[i] += one_dw[i];
    }
    const std::vector<double> dw = w.grad().to_vector<double>();
    for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], dw_sum[i], 1e-10) << "weight " << i;
  }
}

// A 1x1 output reads only the taps inside the image (conv2d skips the padding's) and the pixels
// under the filter: ResNet-50's last stage on small images, where 1 of 9 taps (1 x 1 input,
// stride 1) or 4 of 9 (2 x 2, stride 2) remain, or 1 of 4 pixels under a 1x1 filter of stride 2;
// a non-square input whose rows and columns keep different taps; a filter that leaves the
// image's last rows and columns unread. The values and all three gradients are those of the
// whole filter over the padded input, and the flop count is the whole filter's, forward and
// both gradients.
TEST(Conv2d, AOneByOneOutputReadsOnlyTheTapsInsideTheImage) {
  for (const ConvCase& c :
       {ConvCase{{3, 4, 1, 1}, {5, 4, 3, 3}, 1, 1}, ConvCase{{3, 4, 2, 2}, {5, 4, 3, 3}, 2, 1},
        ConvCase{{2, 3, 1, 2}, {2, 3, 3, 3}, 2, 1}, ConvCase{{2, 3, 1, 3}, {2, 3, 3, 5}, 1, 1},
        ConvCase{{3, 4, 2, 2}, {5, 4, 1, 1}, 2, 0}, ConvCase{{2, 3, 5, 5}, {4, 3, 3, 3}, 3, 0}}) {
    check_against_direct(c.input, c.weight, c.stride, c.padding, true);
    EXPECT_TRUE(gradcheck_conv(c.input, c.weight, c.stride, c.padding)) << shape_str(c.input);
    Tensor x = random_input(c.input, 31), w = random_input(c.weight, 32);
    const int64_t before = flops_counted();
    sum(conv2d(x, w, Tensor(), c.stride, c.padding)).backward();
    const int64_t whole_filter = 2 * c.input[0] * c.weight[0] * c.weight[1] * c.weight[2] * c.weight[3];
    EXPECT_EQ(flops_counted() - before, 3 * whole_filter) << shape_str(c.input);
  }
}

// Images with no more pixels than the filter has taps run as one dense product over the batch
// (conv_dense.h): ResNet-50's 3x3 filters on 2 x 2 images, 1x1 filters on 1 x 1 images, a
// stride that leaves 2 x 2 outputs, a non-square image with padding 1 that makes the output larger
// than the input, and a whole-image filter. Values and gradients against the direct convolution
// and finite differences, the flops of every tap, and the same bits on 1 and 2 threads.
TEST(Conv2d, ImagesNoLargerThanTheFilterRunAsOneDenseProduct) {
  for (const ConvCase& c :
       {ConvCase{{5, 3, 2, 2}, {4, 3, 3, 3}, 1, 1}, ConvCase{{5, 6, 1, 1}, {4, 6, 1, 1}, 1, 0},
        ConvCase{{3, 2, 3, 3}, {4, 2, 3, 3}, 2, 1}, ConvCase{{2, 3, 2, 3}, {4, 3, 2, 3}, 1, 1},
        ConvCase{{2, 1, 4, 4}, {3, 1, 4, 4}, 1, 0}}) {
    SCOPED_TRACE(shape_str(c.input) + " * " + shape_str(c.weight));
    ASSERT_TRUE(cpu::conv2d_runs_dense(geometry_of(c.input, c.weight, c.stride, c.padding)));
    check_against_direct(c.input, c.weight, c.stride, c.padding, true);
    EXPECT_TRUE(gradcheck_conv(c.input, c.weight, c.stride, c.padding));
    auto run = [&](int threads) {
      set_num_threads(threads);
      Tensor x = random_input(c.input, 41), w = random_input(c.weight, 42);
      Tensor y = conv2d(x.to(DType::f32), w.to(DType::f32), Tensor(), c.stride, c.padding);
      const int64_t before = flops_counted();
      sum(y * y).backward();
      const int64_t whole_filter = 2 * y.numel() * c.weight[1] * c.weight[2] * c.weight[3];
      EXPECT_EQ(flops_counted() - before, 2 * whole_filter);
      return std::vector<std::vector<float>>{y.to_vector<float>(), x.grad().to_vector<float>(),
                                             w.grad().to_vector<float>()};
    };
    const auto one = run(1), two = run(2);
    set_num_threads(1);
    EXPECT_EQ(one, two);
  }
}

TEST(Conv2d, NonContiguousInput) {
  // A channels-last buffer permuted to (N, C, H, W): conv2d must read the values, not the layout.
  Tensor nhwc = randn_f32({2, 5, 6, 3}, 7);
  Tensor x = nhwc.permute({0, 3, 1, 2});
  ASSERT_FALSE(x.is_contiguous());
  Tensor w = randn_f32({4, 3, 3, 3}, 8);
  const std::vector<double> actual = conv2d(x, w, Tensor(), 1, 1).to_vector<double>();
  const std::vector<double> expected = direct_conv2d(x, w, Tensor(), 1, 1);
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected[i], 1e-4);
}

TEST(Conv2d, GradcheckStrideAndPadding) {
  for (int64_t stride : {1, 2}) {
    for (int64_t padding : {0, 1}) {
      SCOPED_TRACE("stride " + std::to_string(stride) + " padding " + std::to_string(padding));
      EXPECT_TRUE(gradcheck_conv({2, 2, 5, 6}, {3, 2, 3, 3}, stride, padding));
    }
  }
  // Non-square kernel, one image (the GEMMs get the threads, not the images).
  EXPECT_TRUE(gradcheck_conv({1, 2, 5, 4}, {2, 2, 2, 3}, 2, 1));
}

TEST(Conv2d, GradcheckBlockedGemmPath) {
  // 8 channels in and out on 8x8 images: every GEMM of forward and backward is above gemm's
  // small-problem threshold, so its packed kernel is checked in float64 too.
  EXPECT_TRUE(gradcheck_conv({2, 8, 8, 8}, {8, 8, 3, 3}, 1, 1));
}

TEST(Conv2d, GradcheckWithoutBias) {
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor(), 2, 1); },
                        {random_input({2, 2, 5, 5}, 9), random_input({3, 2, 3, 3}, 10)}));
}

TEST(Conv2d, InputGradientOnlyWhenRequired) {
  // A network's first layer: the images do not require grad, the weights do.
  Tensor x = random_input({2, 1, 6, 6}, 11, /*requires_grad=*/false);
  Tensor w = random_input({4, 1, 3, 3}, 12);
  Tensor b = random_input({4}, 13);
  Tensor y = conv2d(x, w, b);
  sum(y).backward();
  EXPECT_FALSE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  // d(sum y)/d bias[c] = number of output pixels over the batch: 2 * 4 * 4.
  for (double v : b.grad().to_vector<double>()) EXPECT_EQ(v, 32.0);
  // d(sum y)/d w[c][0][i][j] = sum of the input pixels that tap (i, j) sees.
  const std::vector<double> xv = x.to_vector<double>(), gw = w.grad().to_vector<double>();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      double seen = 0.0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t oh = 0; oh < 4; ++oh)
          for (int64_t ow = 0; ow < 4; ++ow) seen += xv[(n * 6 + oh + i) * 6 + ow + j];
      for (int64_t c = 0; c < 4; ++c) EXPECT_NEAR(gw[(c * 3 + i) * 3 + j], seen, 1e-12);
    }
  }
}

TEST(Conv2d, ErrorMessages) {
  EXPECT_EQ(error_message([] { conv2d(zeros({8, 3, 28, 28}), zeros({32, 1, 3, 3})); }),
            "conv2d: input has 3 channels but weight expects 1 (weight shape [32, 1, 3, 3])");
  expect_error([] { conv2d(zeros({3, 28, 28}), zeros({32, 3, 3, 3})); },
               "conv2d: expected input to be 4-D (N, C, H, W), got shape [3, 28, 28]");
  expect_error([] { conv2d(zeros({1, 3, 28, 28}), zeros({32, 3, 3})); }, "expected weight to be 4-D");
  EXPECT_EQ(error_message([] { conv2d(zeros({1, 1, 4, 4}), zeros({2, 1, 7, 7}), Tensor(), 1, 1); }),
            "conv2d: kernel 7x7 is larger than the padded input 6x6 (input 4x4, padding 1)");
  EXPECT_EQ(error_message([] { conv2d(zeros({1, 1, 4, 4}), zeros({2, 1, 3, 3}), Tensor(), 0); }),
            "conv2d: stride must be positive, got 0");
  EXPECT_EQ(error_message([] { conv2d(zeros({1, 1, 4, 4}), zeros({2, 1, 3, 3}), Tensor(), 1, -1); }),
            "conv2d: padding must be non-negative, got -1");
  expect_error([] { conv2d(zeros({1, 1, 4, 4}), zeros({2, 1, 3, 3}), zeros({3})); },
               "expected bias of shape [2] (one per output channel), got [3]");
  expect_error([] { conv2d(zeros({1, 1, 4, 4}), zeros({2, 1, 3, 3}, TensorOptions().dtype(DType::f64))); }, "dtype");
}

// A 16-bit convolution is the f32 one on the same (rounded) values, up to the rounding of its
// result: its products are summed in f32 and rounded once. Forward and both gradients, for a
// 1x1 convolution whose patches are the image itself, a strided 1x1 one, a 3x3 one and a 3x3 one
// on 2 x 2 images (the dense product).
TEST(Conv2d, SixteenBitIsTheF32ConvolutionOfTheSameValuesRoundedOnce) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (const ConvCase& c :
         {ConvCase{{3, 16, 7, 7}, {24, 16, 1, 1}, 1, 0}, ConvCase{{3, 16, 7, 7}, {24, 16, 1, 1}, 2, 0},
          ConvCase{{3, 8, 9, 9}, {12, 8, 3, 3}, 1, 1}, ConvCase{{3, 8, 2, 2}, {12, 8, 3, 3}, 1, 1}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(c.input) + " * " + shape_str(c.weight) +
                   " stride " + std::to_string(c.stride));
      // Each run: y = conv(x, w), loss = sum(y * probe); returns y, dx, dw as doubles.
      const Tensor x0 = randn_f32(c.input, 31).to(dtype), w0 = randn_f32(c.weight, 32).to(dtype);
      auto run = [&](DType as) {
        Tensor x = x0.to(as).detach().requires_grad_(true), w = w0.to(as).detach().requires_grad_(true);
        Tensor y = conv2d(x, w, Tensor(), c.stride, c.padding);
        const Tensor probe = randn_f32(y.shape(), 33).to(dtype).to(as);
        sum(y * probe).backward();
        return std::vector<std::vector<double>>{y.to_vector<double>(), x.grad().to_vector<double>(),
                                                w.grad().to_vector<double>()};
      };
      const auto half = run(dtype), full = run(DType::f32);
      const double rounding = dtype == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
      const char* names[] = {"y", "dx", "dw"};
      for (int t = 0; t < 3; ++t) {
        double scale = 0.0;
        for (double v : full[t]) scale = std::max(scale, std::abs(v));
        for (size_t i = 0; i < full[t].size(); ++i)
          ASSERT_NEAR(half[t][i], full[t][i], rounding * scale) << names[t] << "[" << i << "]";
      }
    }
  }
}
