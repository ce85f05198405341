// conv2d on a CUDA device: im2col, col2im, and the forward and backward passes built from them
// and cuda::gemm. CPU reference: cpu::conv2d_forward_kernel and cpu::conv2d_backward_kernel
// (src/tensor/ops/cpu/conv_kernels.cpp), whose header has the formulas. Shapes:
//   x: (N, C_in, H, W)   w: (C_out, C_in, kH, kW) = (C_out, patch)   y, dy: (N, C_out, H_out, W_out)
//
// The CPU runs one small GEMM per image (per few images when an image has under 32 output
// pixels), one share of the batch per thread. A GPU needs large GEMMs to keep
// its thousands of cores busy, so here a chunk of n images is unfolded at once:
//   cols (patch, n * pixels)   column (img, oh, ow) = the patch of image img under output pixel (oh, ow)
// where patch = C_in*kH*kW and pixels = H_out*W_out. Then, per chunk:
//   forward:   y_img = w . cols[:, img]           one batched GEMM, w shared by every image
//   dW:        dW += dyT . cols^T                 one GEMM summing over all n * pixels columns
//   dx:        cols = w^T . dyT; dx = col2im(cols)
// with dyT (C_out, n * pixels) the chunk's dy with its first two dimensions swapped. Chunks keep
// their scratch under kScratchBudgetBytes; for typical layers a chunk still holds many images.
//
// f16 and bf16 (mixed precision): im2col copies 16-bit values, the GEMMs multiply them on tensor
// cores with f32 sums and f32 results (cuda::gemm's 16-bit overloads), and every result stays
// f32 until it is rounded to 16 bits once: y (with its bias added in f32), the patches'
// gradient (which col2im sums in f32 per pixel), and dW (summed over all chunks in f32). Acc =
// opmath_t is the type of those results: T itself for f32 and f64, whose GEMMs write straight
// into y, cols and dW. The CPU kernels round at the same points.
#include "tensor/ops/dispatch/conv_kernels.h"

#include <algorithm>
#include <type_traits>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dispatch.h"
#include "tensor/ops/cuda/gemm.h"

namespace lockstep::cuda {

namespace {

// The most scratch memory one chunk may use (its im2col matrix, and for 16-bit types the f32
// results). 64 MiB holds, for instance, the im2col matrix of 8 images of a 64-channel 3x3
// convolution over 56x56 pixels in f32: GEMMs with 25,000 columns, plenty for a GPU, while the
// buffers stay small next to the GPU's memory.
constexpr int64_t kScratchBudgetBytes = int64_t(64) << 20;

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
    cols[e] = inside ? x[((img * g.channels + c) * g.height + ih) * g.width + iw] : convert<T>(0);
  }
}

// The adjoint of im2col: dx (images, C_in, H, W) where each pixel is the sum of the entries of
// cols that were copied from it. One thread per pixel, which gathers its entries: the output
// pixels (oh, ow) whose patch covers it at filter offset (i, j), i.e. oh*stride - padding + i ==
// ih. No two threads write the same pixel, so no atomics are needed, and each pixel adds its
// terms in the CPU's order (i, then j, ascending), in Acc, and rounds the sum to T once.
template <class Acc, class T>
__global__ void col2im_pixels(const Acc* cols, Conv2dGeometry g, int64_t images, T* dx) {
  const int64_t pixels = g.out_h * g.out_w, columns = images * pixels;
  const int64_t total = images * g.channels * g.height * g.width;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t iw = e % g.width, ih = e / g.width % g.height;
    const int64_t c = e / (g.width * g.height) % g.channels, img = e / (g.width * g.height * g.channels);
    Acc sum = Acc(0);
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
    dx[e] = convert<T>(sum);
  }
}

// y (images, C_out, pixels) = bias[channel] everywhere, in Acc; the forward GEMM then adds onto it.
template <class T, class Acc>
__global__ void fill_bias(const T* bias, int64_t images, int64_t channels, int64_t pixels, Acc* y) {
  const int64_t total = images * channels * pixels;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    y[e] = convert<Acc>(bias[e / pixels % channels]);
  }
}

// out[e] = sums[e] rounded to the 16-bit T, for e in [0, n): one thread per element.
template <class Acc, class T>
__global__ void round_elements(const Acc* sums, int64_t n, T* out) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(blockDim.x) * gridDim.x) {
    out[e] = convert<T>(sums[e]);
  }
}

// Launches round_elements for n > 0 host-typed values (T = Half or BFloat16).
template <class Acc, class T>
void round_into(const Acc* sums, int64_t n, T* out, cudaStream_t stream) {
  round_elements<<<grid_size(n), kBlockSize, 0, stream>>>(sums, n, device_ptr(out));
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

// Images per chunk for element type T: as many as keep a chunk's scratch within the budget, at
// least one. Per image that is its im2col columns (patch x pixels of T) and, for 16-bit T, the
// larger of the f32 results a GEMM writes per image before they are rounded: the output
// (C_out x pixels) or the patches' gradient (patch x pixels).
template <class T>
int64_t images_per_chunk(const Conv2dGeometry& g, int64_t out_channels) {
  using Acc = opmath_t<T>;
  const int64_t f32_results =
      std::is_same_v<T, Acc> ? 0 : std::max(g.patch_size(), out_channels) * int64_t(sizeof(Acc));
  const int64_t bytes_per_image =
      std::max<int64_t>(1, g.out_pixels() * (g.patch_size() * int64_t(sizeof(T)) + f32_results));
  return std::max<int64_t>(1, kScratchBudgetBytes / bytes_per_image);
}

// A (rows, columns) scratch matrix of dtype `dtype` on `like`'s device.
Tensor scratch(const Tensor& like, int64_t rows, int64_t columns, DType dtype) {
  return empty({rows, columns}, like.options().dtype(dtype));
}

}  // namespace

void conv2d_forward_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                           const Conv2dGeometry& g) {
  const Device device = out.device();
  const cudaStream_t stream = stream_for(device);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  dispatch_floating_and_16bit(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;  // the GEMM's sums and result: f32 for 16-bit T
    constexpr bool wide = std::is_same_v<T, Acc>;
    const T* x = input.data_ptr<T>();
    const T* w = weight.data_ptr<T>();  // (C_out, patch)
    const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    T* y = out.data_ptr<T>();
    const int64_t chunk = std::min(images_per_chunk<T>(g, out_channels), batch);
    const Tensor cols_tensor = scratch(input, patch, chunk * pixels, input.dtype());
    T* cols = cols_tensor.data_ptr<T>();
    // A 16-bit chunk's output in f32, (images, C_out, pixels), rounded into y once.
    const Tensor sums_tensor = wide ? Tensor() : scratch(input, chunk, out_channels * pixels, dtype_of<Acc>::value);

    for (int64_t first = 0; first < batch; first += chunk) {
      const int64_t images = std::min(chunk, batch - first);
      T* y_chunk = y + first * out_channels * pixels;  // (images, C_out, pixels)
      Acc* sums = nullptr;
      if constexpr (wide) {
        sums = y_chunk;
      } else {
        sums = sums_tensor.data_ptr<Acc>();
      }
      // Unfold the chunk's images into cols (patch, images * pixels).
      im2col_columns<<<grid_size(patch * images * pixels), kBlockSize, 0, stream>>>(
          device_ptr(x + first * g.image_size()), g, images, device_ptr(cols));
      LOCKSTEP_CUDA_CHECK_LAUNCH();
      // Each output channel starts as its bias; the GEMM adds w . cols onto it (beta = 1).
      if (b != nullptr) {
        fill_bias<<<grid_size(images * out_channels * pixels), kBlockSize, 0, stream>>>(
            device_ptr(b), images, out_channels, pixels, sums);
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      }
      // y_img (C_out, pixels) = w (C_out, patch) . cols_img (patch, pixels) for every image of
      // the chunk: cols_img is cols's columns [img * pixels, (img + 1) * pixels), a matrix with
      // row stride images * pixels; w is the same for all (batch stride 0).
      gemm_batched(images, out_channels, pixels, patch, Acc(1), w, 0, patch, 1, cols, pixels, images * pixels, 1,
                   Acc(b != nullptr ? 1 : 0), sums, out_channels * pixels, pixels);
      if constexpr (!wide) round_into(sums, images * out_channels * pixels, y_chunk, stream);
    }
  });
}

void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const Tensor& grad_input, const Tensor& grad_weight, const Conv2dGeometry& g) {
  const Device device = input.device();
  const cudaStream_t stream = stream_for(device);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  dispatch_floating_and_16bit(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;  // the GEMMs' sums and results: f32 for 16-bit T
    constexpr bool wide = std::is_same_v<T, Acc>;
    const T* x = input.data_ptr<T>();
    const T* w = weight.data_ptr<T>();  // (C_out, patch)
    T* dx = grad_input.defined() ? grad_input.data_ptr<T>() : nullptr;
    T* dw = grad_weight.defined() ? grad_weight.data_ptr<T>() : nullptr;
    // An empty batch contributes nothing to dW (and the loop below never writes it).
    if (dw != nullptr && batch == 0) {
      LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(T) * out_channels * patch, stream));
    }
    const int64_t chunk = std::min(images_per_chunk<T>(g, out_channels), batch);
    const Tensor cols_tensor = scratch(input, patch, chunk * pixels, input.dtype());
    T* cols = cols_tensor.data_ptr<T>();
    // Where the GEMMs write: for f32 and f64 dW itself, and cols, reused for the patches'
    // gradient; for 16-bit T f32 scratch, dW's (C_out, patch) sum over every chunk and the
    // patches' gradient (patch, images * pixels), rounded to T once.
    Tensor dw_sums_tensor, grad_cols_tensor;
    Acc* dw_sums = nullptr;
    Acc* grad_cols = nullptr;
    if constexpr (wide) {
      dw_sums = dw;
      grad_cols = cols;
    } else {
      if (dw != nullptr) {
        dw_sums_tensor = scratch(input, out_channels, patch, dtype_of<Acc>::value);
        dw_sums = dw_sums_tensor.data_ptr<Acc>();
      }
      if (dx != nullptr) {
        grad_cols_tensor = scratch(input, patch, chunk * pixels, dtype_of<Acc>::value);
        grad_cols = grad_cols_tensor.data_ptr<Acc>();
      }
    }

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
        im2col_columns<<<grid_size(patch * columns), kBlockSize, 0, stream>>>(device_ptr(x + first * g.image_size()), g,
                                                                              images, device_ptr(cols));
        LOCKSTEP_CUDA_CHECK_LAUNCH();
        gemm(out_channels, patch, columns, Acc(1), dyT, columns, 1, cols, 1, columns, Acc(first == 0 ? 0 : 1),
             dw_sums, patch);
      }
      if (dx != nullptr) {
        // The gradient of every patch, (patch, columns) = w^T (patch, C_out) . dyT, then added
        // back onto the pixels it came from. w^T is w read with its strides swapped.
        gemm(patch, columns, out_channels, Acc(1), w, 1, patch, dyT, columns, 1, Acc(0), grad_cols, columns);
        col2im_pixels<<<grid_size(images * g.image_size()), kBlockSize, 0, stream>>>(grad_cols, g, images,
                                                                                 device_ptr(dx + first * g.image_size()));
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      }
    }
    if constexpr (!wide) {
      if (dw != nullptr && batch > 0) round_into(dw_sums, out_channels * patch, dw, stream);
    }
  });
}

}  // namespace lockstep::cuda
