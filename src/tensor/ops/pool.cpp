#include "tensor/ops/pool.h"

#include "tensor/autograd/node.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch/pool_kernels.h"

namespace lockstep {

Tensor max_pool2d(const Tensor& input, int64_t kernel_size, int64_t stride, int64_t padding) {
  check_defined("max_pool2d", {&input});
  LOCKSTEP_CHECK(input.dim() == 4, "max_pool2d: expected input to be 4-D (N, C, H, W), got shape ",
                 shape_str(input.shape()));
  LOCKSTEP_CHECK(kernel_size > 0, "max_pool2d: kernel_size must be positive, got ", kernel_size);
  LOCKSTEP_CHECK(stride >= 0, "max_pool2d: stride must be positive (or 0 for the default, stride = kernel_size), got ",
                 stride);
  if (stride == 0) stride = kernel_size;
  // With more padding a border window could hold nothing but padding (PyTorch forbids it too).
  LOCKSTEP_CHECK(padding >= 0 && padding <= kernel_size / 2, "max_pool2d: padding must be between 0 and kernel_size / 2 = ",
                 kernel_size / 2, ", got padding ", padding, " with kernel_size ", kernel_size);
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  LOCKSTEP_CHECK(H + 2 * padding >= kernel_size && W + 2 * padding >= kernel_size, "max_pool2d: input of spatial size ",
                 H, "x", W, " (padded by ", padding, ") is smaller than kernel_size ", kernel_size,
                 ", so the output would be empty");
  const int64_t OH = (H + 2 * padding - kernel_size) / stride + 1;
  const int64_t OW = (W + 2 * padding - kernel_size) / stride + 1;

  const auto options = input.options();
  Tensor out = empty({N, C, OH, OW}, options);
  // indices: (N, C, OH, OW), where in its (H, W) plane each maximum came from.
  Tensor indices = empty({N, C, OH, OW}, TensorOptions().dtype(DType::i64).device(input.device()));
  kernels::max_pool2d.call(out.device(), input, kernel_size, stride, padding, out, indices);

  // Only the maxima influenced the output, so only they receive gradient.
  return record(out, "MaxPool2DWithIndicesBackward", {input},
                [indices, kernel_size, stride, padding, shape = input.shape(), options](const Tensor& g) {
    Tensor grad_input = empty(shape, options);
    kernels::max_pool2d_backward.call(grad_input.device(), g, indices, kernel_size, stride, padding, grad_input);
    return std::vector<Tensor>{grad_input};
  });
}

}  // namespace lockstep
