// conv2d on a CUDA device: im2col, col2im, and the forward and backward passes built from them
// and cuda::gemm. CPU reference: cpu::conv2d_forward_kernel and cpu::conv2d_backward_kernel
// (src/tensor/ops/cpu/conv_kernels.cpp), whose header has the formulas. Shapes:
//   x: (N, C_in, H, W)   w: (C_out, C_in, kH, kW) = (C_out, patch)   y, dy: (N, C_out, H_out, W_out)
//
// The CPU runs one small GEMM per image, one image per thread. A GPU needs large GEMMs to keep
// its thousands of cores busy, so here a chunk of n images is unfolded at once:
//   cols (patch, n * pixels)   column (img, oh, ow) = the patch of image img under output pixel (oh, ow)
// where patch = C_in*kH*kW and pixels = H_out*W_out. Then, per chunk:
//   forward:   y_img = w . cols[:, img]           one batched GEMM, w shared by every image
//   dW:        dW += dyT . cols^T                 one GEMM summing over all n * pixels columns
//   dx:        cols = w^T . dyT; dx = col2im(cols)
// with dyT (C_out, n * pixels) the chunk's dy with its first two dimensions swapped. Chunks keep
// cols under kColsBudgetBytes; for typical layers a chunk still holds many images.
#include "tensor/ops/cuda/conv_kernels.h"

#include <algorithm>

#include "tensor/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/cuda/gemm.h"

namespace lockstep::cuda {

namespace {

// The largest im2col matrix one chunk may use. 64 MiB holds, for instance, 8 images of a
// 64-channel 3x3 convolution over 56x56 pixels in f32: GEMMs with 25,000 columns, plenty for a
// GPU, while the buffer stays small next to the GPU's memory.
constexpr int64_t kColsBudgetBytes = int64_t(64) << 20;

// cols (patch, images * pixels) from x (images, C_in, H, W): one thread per entry of cols, in
// cols's order, so neighbouring threads write neighbouring addresses and (for stride 1) read
// neighbouring pixels. Entry (row, column) with row = (c, i, j) and column = (img, oh, ow) is
// x[img, c, oh*stride - padding + i, ow*stride - padding + j], or 0 in the padding.
template <class T>
__global__ void im2col_columns(const T* x, Conv2dGeometry g, int64_t images, T* cols) {
  const int64_t pixels = g.out_h * g.out_w, columns = images * pixels;
  const int64_t total = g.channels * g.kernel_h * g.kernel_w * columns;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t row = e / columns, column = e % columns;
    const int64_t c = row / (g.kernel_h * g.kernel_w), i = row / g.kernel_w % g.kernel_h, j = row % g.kernel_w;
    const int64_t img = column / pixels, oh = column % pixels / g.out_w, ow = column % g.out_w;
    const int64_t ih = oh * g.stride - g.padding + i, iw = ow * g.stride - g.padding + j;
    const bool inside = ih >= 0 && ih < g.height && iw >= 0 && iw < g.width;
    cols[e] = inside ? x[((img * g.channels + c) * g.height + ih) * g.width + iw] : T(0);
  }
}

// The adjoint of im2col: dx (images, C_in, H, W) where each pixel is the sum of the entries of
// cols that were copied from it. One thread per pixel, which gathers its entries: the output
// pixels (oh, ow) whose patch covers it at filter offset (i, j), i.e. oh*stride - padding + i ==
// ih. No two threads write the same pixel, so no atomics are needed, and each pixel adds its
// terms in the CPU's order (i, then j, ascending).
template <class T>
__global__ void col2im_pixels(const T* cols, Conv2dGeometry g, int64_t images, T* dx) {
  const int64_t pixels = g.out_h * g.out_w, columns = images * pixels;
  const int64_t total = images * g.channels * g.height * g.width;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t iw = e % g.width, ih = e / g.width % g.height;
    const int64_t c = e / (g.width * g.height) % g.channels, img = e / (g.width * g.height * g.channels);
    T sum = T(0);
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      // oh * stride == ih + padding - i must have a whole, in-range solution oh.
      const int64_t h = ih + g.padding - i;
      if (h < 0 || h % g.stride != 0 || h / g.stride >= g.out_h) continue;
      const int64_t oh = h / g.stride;
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t w = iw + g.padding - j;
        if (w < 0 || w % g.stride != 0 || w / g.stride >= g.out_w) continue;
        const int64_t ow = w / g.stride;
        const int64_t row = (c * g.kernel_h + i) * g.kernel_w + j;
        sum += cols[row * columns + img * pixels + oh * g.out_w + ow];
      }
    }
    dx[e] = sum;
  }
}

// y (images, C_out, pixels) = bias[channel] everywhere; the forward GEMM then adds onto it.
template <class T>
__global__ void fill_bias(const T* bias, int64_t images, int64_t channels, int64_t pixels, T* y) {
  const int64_t total = images * channels * pixels;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    y[e] = bias[e / pixels % channels];
  }
}

// Images per chunk for element type T: as many as keep cols within the budget, at least one.
template <class T>
int64_t images_per_chunk(const Conv2dGeometry& g) {
  const int64_t bytes_per_image = std::max<int64_t>(1, g.patch_size() * g.out_pixels() * int64_t(sizeof(T)));
  return std::max<int64_t>(1, kColsBudgetBytes / bytes_per_image);
}

// The cols buffer for chunks of `chunk` images (fewer images use its beginning).
Tensor cols_buffer(const Tensor& like, const Conv2dGeometry& g, int64_t chunk) {
  return empty({g.patch_size(), chunk * g.out_pixels()}, like.options());
}

}  // namespace

void conv2d_forward_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                           const Conv2dGeometry& g) {
  const Device device = out.device();
  const cudaStream_t stream = stream_for(device);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  const int64_t image_size = g.channels * g.height * g.width;
  dispatch_floating(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = input.data_ptr<T>();
    const T* w = weight.data_ptr<T>();  // (C_out, patch)
    const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    T* y = out.data_ptr<T>();
    const int64_t chunk = images_per_chunk<T>(g);
    const Tensor cols_tensor = cols_buffer(input, g, std::min(chunk, batch));
    T* cols = cols_tensor.data_ptr<T>();

    for (int64_t first = 0; first < batch; first += chunk) {
      const int64_t images = std::min(chunk, batch - first);
      T* y_chunk = y + first * out_channels * pixels;  // (images, C_out, pixels)
      // Unfold the chunk's images into cols (patch, images * pixels).
      im2col_columns<T><<<grid_size(patch * images * pixels), kBlockSize, 0, stream>>>(x + first * image_size, g,
                                                                                       images, cols);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
      // Each output channel starts as its bias; the GEMM adds w . cols onto it (beta = 1).
      if (b != nullptr) {
        fill_bias<T><<<grid_size(images * out_channels * pixels), kBlockSize, 0, stream>>>(
            b, images, out_channels, pixels, y_chunk);
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      }
      // y_img (C_out, pixels) = w (C_out, patch) . cols_img (patch, pixels) for every image of
      // the chunk: cols_img is cols's columns [img * pixels, (img + 1) * pixels), a matrix with
      // row stride images * pixels; w is the same for all (batch stride 0).
      gemm_batched(images, out_channels, pixels, patch, T(1), w, 0, patch, 1, cols, pixels, images * pixels, 1,
                   T(b != nullptr ? 1 : 0), y_chunk, out_channels * pixels, pixels);
    }
  });
}

void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const Tensor& grad_input, const Tensor& grad_weight, const Conv2dGeometry& g) {
  const Device device = input.device();
  const cudaStream_t stream = stream_for(device);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  const int64_t image_size = g.channels * g.height * g.width;
  dispatch_floating(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = input.data_ptr<T>();
    const T* w = weight.data_ptr<T>();  // (C_out, patch)
    T* dx = grad_input.defined() ? grad_input.data_ptr<T>() : nullptr;
    T* dw = grad_weight.defined() ? grad_weight.data_ptr<T>() : nullptr;
    // An empty batch contributes nothing to dW (and the loop below never writes it).
    if (dw != nullptr && batch == 0) {
      LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(T) * out_channels * patch, stream));
    }
    const int64_t chunk = images_per_chunk<T>(g);
    const Tensor cols_tensor = cols_buffer(input, g, std::min(chunk, batch));
    T* cols = cols_tensor.data_ptr<T>();

    for (int64_t first = 0; first < batch; first += chunk) {
      const int64_t images = std::min(chunk, batch - first);
      const int64_t columns = images * pixels;
      // dyT (C_out, images * pixels): the chunk's dy (images, C_out, pixels) with its first two
      // dimensions swapped, so that both GEMMs below see one matrix with a column per
      // (image, pixel), in the same order as cols.
      const Tensor dyT_tensor =
          grad_out.slice(0, first, first + images).reshape({images, out_channels, pixels}).transpose(0, 1).contiguous();
      const T* dyT = dyT_tensor.data_ptr<T>();
      if (dw != nullptr) {
        // dW (C_out, patch) += dyT (C_out, columns) . cols^T (columns, patch); cols^T is cols read
        // with its strides swapped. The first chunk overwrites dW (beta = 0), later ones add.
        im2col_columns<T><<<grid_size(patch * columns), kBlockSize, 0, stream>>>(x + first * image_size, g, images,
                                                                                 cols);
        LOCKSTEP_CUDA_CHECK_LAUNCH();
        gemm(out_channels, patch, columns, T(1), dyT, columns, 1, cols, 1, columns, T(first == 0 ? 0 : 1), dw,
             patch);
      }
      if (dx != nullptr) {
        // The gradient of every patch, cols (patch, columns) = w^T (patch, C_out) . dyT, then
        // added back onto the pixels it came from. w^T is w read with its strides swapped.
        gemm(patch, columns, out_channels, T(1), w, 1, patch, dyT, columns, 1, T(0), cols, columns);
        T* dx_chunk = dx + first * image_size;
        col2im_pixels<T><<<grid_size(images * image_size), kBlockSize, 0, stream>>>(cols, g, images, dx_chunk);
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      }
    }
  });
}

}  // namespace lockstep::cuda
