// conv2d: checks the shapes, runs the im2col + GEMM kernels of the tensors' device
// (tensor/ops/dispatch/conv_kernels.h, tensor/ops/dispatch/conv_kernels.h) and records the backward pass.
#include "tensor/ops/conv.h"

#include <algorithm>

#include "tensor/autocast.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "core/error.h"
#include "core/flop_count.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch/conv_kernels.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

namespace {

// The output size along one dimension: how many positions of a `kernel`-wide filter, moved
// `stride` at a time, fit into `size` plus `padding` on both sides.
int64_t conv_out_size(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

}  // namespace

Tensor conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, int64_t stride,
              int64_t padding) {
  // conv2d is on autocast's lower-precision list: in a region all three become 16-bit, the
  // parameters through the cast cache.
  const Tensor input = autocast::to_lower_precision(input_in), weight = autocast::to_lower_precision(weight_in),
               bias = autocast::to_lower_precision(bias_in);
  check_same_device("conv2d", {&input, &weight});
  check_same_dtype("conv2d", {&input, &weight});
  LOCKSTEP_CHECK(input.dim() == 4, "conv2d: expected input to be 4-D (N, C, H, W), got shape ",
                 shape_str(input.shape()), input.dim() == 3 ? " (add a batch dimension with unsqueeze(0))" : "");
  LOCKSTEP_CHECK(weight.dim() == 4, "conv2d: expected weight to be 4-D (C_out, C_in, kH, kW), got shape ",
                 shape_str(weight.shape()));
  LOCKSTEP_CHECK(input.size(1) == weight.size(1), "conv2d: input has ", input.size(1), " channels but weight expects ",
                 weight.size(1), " (weight shape ", shape_str(weight.shape()), ")");
  if (bias.defined()) {
    check_same_device("conv2d", {&input, &bias});
    check_same_dtype("conv2d", {&input, &bias});
    LOCKSTEP_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "conv2d: expected bias of shape [",
                   weight.size(0), "] (one per output channel), got ", shape_str(bias.shape()));
  }
  LOCKSTEP_CHECK(stride > 0, "conv2d: stride must be positive, got ", stride);
  LOCKSTEP_CHECK(padding >= 0, "conv2d: padding must be non-negative, got ", padding);

  Conv2dGeometry g;
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.kernel_h = weight.size(2);
  g.kernel_w = weight.size(3);
  g.stride = stride;
  g.padding = padding;
  LOCKSTEP_CHECK(g.kernel_h <= g.height + 2 * padding && g.kernel_w <= g.width + 2 * padding, "conv2d: kernel ",
                 g.kernel_h, "x", g.kernel_w, " is larger than the padded input ", g.height + 2 * padding, "x",
                 g.width + 2 * padding, " (input ", g.height, "x", g.width, ", padding ", padding, ")");
  g.out_h = conv_out_size(g.height, g.kernel_h, stride, padding);
  g.out_w = conv_out_size(g.width, g.kernel_w, stride, padding);
  // One multiply-add per weight of a patch, per output pixel, channel and image.
  const int64_t product_flops = 2 * input.size(0) * weight.size(0) * g.out_pixels() * g.patch_size();

  // A 1x1 output reads only the taps of the filter that land inside the image, and only the
  // pixels under the filter (ResNet-50's last stage on 28 x 28 images: 1 of 9 taps at 1 x 1
  // pixels, 4 of 9 at 2 x 2, and 1 of 4 pixels under its 1x1 shortcut of stride 2): it is the
  // convolution of those taps with those pixels alone, unpadded, which skips multiplying the
  // rest by the padding's zeros, or not at all. The slices are views that autograd sees, so the
  // gradients of the taps and pixels left out are zero, as they are. The flop count stays the
  // model's, all taps, as PyTorch counts it: the taps left out are counted here, for the forward
  // product and for each gradient product its backward pass will run (a pass recorded now, as
  // training records it).
  if (g.out_h == 1 && g.out_w == 1) {
    // Tap i reads input row i - padding: inside the image for i in [padding, padding + H).
    const int64_t i0 = std::min(padding, g.kernel_h), i1 = std::min(padding + g.height, g.kernel_h);
    const int64_t j0 = std::min(padding, g.kernel_w), j1 = std::min(padding + g.width, g.kernel_w);
    if (i1 - i0 < g.kernel_h || j1 - j0 < g.kernel_w || i1 - i0 < g.height || j1 - j0 < g.width) {
      const Tensor taps = weight.slice(2, i0, i1).slice(3, j0, j1);
      const Tensor pixels = input.slice(2, i0 - padding, i1 - padding).slice(3, j0 - padding, j1 - padding);
      const int64_t kept_flops = 2 * input.size(0) * weight.size(0) * g.channels * (i1 - i0) * (j1 - j0);
      const int64_t gradients =
          grad_mode_enabled() ? (input.requires_grad() ? 1 : 0) + (weight.requires_grad() ? 1 : 0) : 0;
      count_flops((product_flops - kept_flops) * (1 + gradients));
      return conv2d(pixels, taps, bias, 1, 0);
    }
  }

  // The kernels want dense operands; detached, so that making them dense is not recorded.
  const Tensor x = input.detach().contiguous();
  const Tensor w = weight.detach().contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor out = empty({input.size(0), weight.size(0), g.out_h, g.out_w}, input.options());
  count_flops(product_flops);
  kernels::conv2d_forward.call(out.device(), x, w, b, out, g);

  return record(out, "ConvolutionBackward", {input, weight, bias},
                [x_saved = SavedTensor(x), w_saved = SavedTensor(w), g, rx = input.requires_grad(),
                 rw = weight.requires_grad(), rb = bias.defined() && bias.requires_grad(), product_flops](const Tensor& grad) {
                  const Tensor x = x_saved.unpack(), w = w_saved.unpack();
                  const Tensor dy = grad.contiguous();
                  const Tensor dx = rx ? empty_like(x) : Tensor();
                  const Tensor dw = rw ? empty_like(w) : Tensor();
                  // Each gradient is a product the size of the forward one.
                  count_flops(product_flops * ((rx ? 1 : 0) + (rw ? 1 : 0)));
                  if (rx || rw) kernels::conv2d_backward.call(dy.device(), dy, x, w, dx, dw, g);
                  // Every output pixel of channel c added bias[c] once.
                  return std::vector<Tensor>{dx, dw, rb ? sum(dy, {0, 2, 3}) : Tensor()};
                });
}

}  // namespace lockstep
