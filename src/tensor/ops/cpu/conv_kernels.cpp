// CPU conv2d: im2col / col2im, and the forward and backward passes as one GEMM per image (per
// chunk of images, for images of few pixels); images no larger than the filter go to the dense
// product of conv_dense.h instead.
// The formulas and shapes are in conv_kernels.h.
#include "tensor/ops/dispatch/conv_kernels.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/threads.h"
#include "tensor/ops/cpu/conv_dense.h"
#include "tensor/ops/cpu/gemm.h"
#include "tensor/ops/cpu/gemm_bf16.h"
#include "tensor/ops/cpu/gemm_sums.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace lockstep::cpu {

namespace {

// The output columns [lo, hi) whose input column ow*stride - padding + k falls inside the
// image [0, size): outside that range the patch reads padding.
std::pair<int64_t, int64_t> inside_range(int64_t k, int64_t size, int64_t out_size, int64_t stride,
                                         int64_t padding) {
  const int64_t first = padding - k;             // ow * stride >= first
  const int64_t last = size - 1 + padding - k;   // ow * stride <= last
  if (last < 0) return {0, 0};
  const int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t hi = std::min(out_size, last / stride + 1);
  return {lo, std::max(lo, hi)};
}

// Walks the im2col matrix one segment at a time: the W_out entries of row (c, i, j) that
// belong to output row oh. Calls `segment(col, in, lo, hi)` where `col` is the segment's
// offset in cols, and entries [lo, hi) of it read input pixels in, in + stride, ... (offsets
// in x); the others read padding (lo == hi when the whole segment does).
// im2col copies along these segments; col2im adds back along them. As each row (c, i, j)
// begins, `first_segment(row, i)`, given the row's offset in cols, returns the first oh to walk:
// the row's segments before it are skipped.
// The geometry is taken by value: a reference could point at memory that the copy inside
// `segment` (a call to memmove) might change, so the compiler would reload every field after
// each segment. With a copy of its own it keeps them in registers.
template <class Segment, class FirstSegment>
void for_each_segment(const Conv2dGeometry g, Segment segment, FirstSegment first_segment) {
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t row = ((c * g.kernel_h + i) * g.kernel_w + j) * g.out_pixels();
        const auto [lo, hi] = inside_range(j, g.width, g.out_w, g.stride, g.padding);
        for (int64_t oh = first_segment(row, i); oh < g.out_h; ++oh) {
          const int64_t ih = oh * g.stride - g.padding + i;
          const int64_t col = row + oh * g.out_w;
          if (ih < 0 || ih >= g.height || lo == hi) {
            segment(col, 0, 0, 0);
          } else {
            segment(col, (c * g.height + ih) * g.width + lo * g.stride - g.padding + j, lo, hi);
          }
        }
      }
    }
  }
}

// Walks every segment of the im2col matrix.
template <class Segment>
void for_each_segment(const Conv2dGeometry g, Segment segment) {
  for_each_segment(g, segment, [](int64_t, int64_t) { return int64_t(0); });
}

// Runs `op(k, count)` over [0, n) in pieces: count = 8 values at a time, then 4, 2 and 1 for
// the rest, where `count` is a compile-time constant (std::integral_constant), so each piece
// compiles to a few vector instructions. col2im adds along segments of the im2col matrix,
// which are short (11 values in the chapter-2 CNN's second convolution): too short for a
// loop of unknown length to be vectorised (tests/bench/README.md has the measurements).
template <class Op>
void in_pieces(int64_t n, Op op) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) op(k, std::integral_constant<int, 8>());
  if (n - k >= 4) {
    op(k, std::integral_constant<int, 4>());
    k += 4;
  }
  if (n - k >= 2) {
    op(k, std::integral_constant<int, 2>());
    k += 2;
  }
  if (n - k >= 1) op(k, std::integral_constant<int, 1>());
}

// Copies n values of from to to. im2col's segments are short (11 values in the chapter-2 CNN's
// second convolution: 44 bytes in f32, 22 in bf16), and std::copy makes each a call to memmove,
// whose call and size dispatch cost more than moving so few bytes. With AVX-512 the copy is
// inline: 64 bytes per move, the rest under a byte mask, which reads and writes nothing past n.
template <class T>
void copy_short(const T* from, int64_t n, T* to) {
#ifdef __AVX512BW__
  const char* src = reinterpret_cast<const char*>(from);
  char* dst = reinterpret_cast<char*>(to);
  int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  for (; bytes >= 64; bytes -= 64, src += 64, dst += 64) _mm512_storeu_si512(dst, _mm512_loadu_si512(src));
  const __mmask64 rest = (__mmask64(1) << bytes) - 1;
  _mm512_mask_storeu_epi8(dst, rest, _mm512_maskz_loadu_epi8(rest, src));
#else
  std::copy(from, from + n, to);
#endif
}

// Splits [0, batch) into `shares` contiguous ranges and runs `work(first, last)` for each, one
// share per thread. The forward pass uses it: each image's output depends on that image alone,
// so however the batch is split, every run computes the same bits.
template <class Work>
void for_each_share(int64_t batch, int64_t shares, Work work) {
#pragma omp parallel for schedule(static) if (shares > 1)
  for (int64_t s = 0; s < shares; ++s) work(batch * s / shares, batch * (s + 1) / shares);
}

// How many shares to split a batch into. With at least one image per thread, every thread
// runs whole images and its GEMMs stay single-threaded (OpenMP gives the parallel region
// inside gemm a team of one). With fewer images, images run one by one and each GEMM uses
// all the threads instead.
//
// Why not one im2col matrix for the whole batch, (C_in*kH*kW, N*H_out*W_out), and a single large
// GEMM that parallelises itself? Per-image shares are faster on the chapter-2 CNN, even though the
// single GEMM keeps its cols from the forward pass instead of recomputing them
// (tests/bench/README.md has the measurements). The single GEMM needs y and dy permuted between (N,
// C_out, pixels) and (C_out, N*pixels), its cols matrix is N times larger and falls out of cache,
// and its threads meet at barriers; per-image work runs without synchronisation until the dW
// partial sums are added (the backward pass splits the batch the same way, into the fixed groups of
// weight_grad_groups below rather than one share per thread).
int64_t batch_shares(int64_t batch) {
  const int64_t threads = get_num_threads();
  return batch >= threads ? threads : 1;
}

// An image with fewer output pixels than this makes GEMMs too narrow to pay for packing the
// weights, which every GEMM call does: in ResNet-50's last stage an image has 1 x 1 pixels, and
// its 1x1 convolutions are far slower one image at a time than the same product as one matmul
// over the batch (chapter 7, section 3, has the measurements). Such images go
// through the GEMMs in chunks of consecutive images, side by side as columns, about
// kProductColumns columns each.
constexpr int64_t kMinGemmColumns = 32;
constexpr int64_t kProductColumns = 256;

// Images per chunk of the weight gradient's sums: 1 for images of kMinGemmColumns pixels or
// more (every layer of the chapter CNN, and of ResNet-8 on 28 x 28 or 32 x 32 images, which keep
// their per-image GEMMs), else enough for kProductColumns columns: a chunk's GEMM sums over
// that many columns at once, where narrower chunks would each read and write all of dW's
// partial sum for a few columns' products. Fixed by the geometry, so the chunks, and with them
// every sum, do not depend on the thread count.
int64_t images_per_chunk(int64_t pixels) {
  return pixels >= kMinGemmColumns ? 1 : (kProductColumns + pixels - 1) / pixels;
}

// How many groups of consecutive images the weight gradient's sum over the batch is split into: a
// number fixed by the batch and the chunk size alone, so that the thread count changes the speed
// of a training run and never its bits (each group's partial sum, and the order the partial sums
// are added in, would otherwise move with the thread count). 16 groups keep up to 16 threads
// busy; more threads than that share out only 16 groups. The partial sums cost 16 copies of dW.
// A group holds at least one chunk: with chunks of many small images there are fewer groups
// (one for ResNet-50's 1 x 1 images at a batch of 256), and each GEMM uses every thread instead.
constexpr int64_t kWeightGradGroups = 16;

int64_t weight_grad_groups(int64_t batch, int64_t per_chunk) {
  return std::min((batch + per_chunk - 1) / per_chunk, kWeightGradGroups);
}

// The forward pass and the input's gradient are products whose every column (one output pixel
// of one image) is its own sum, so chunking changes their speed and never their bits; only the
// weight gradient, summed over the batch, is tied to images_per_chunk's chunks. Images of fewer
// than kMinPerImagePixels output pixels (ResNet-50's last three stages on 28 x 28 images: 16, 4
// and 1 pixels, and its first at 49) go through those products in chunks of about
// kProductColumns columns.
constexpr int64_t kMinPerImagePixels = 64;

int64_t images_per_product(int64_t pixels) {
  return pixels >= kMinPerImagePixels ? 1 : (kProductColumns + pixels - 1) / pixels;
}

// A chunk's matrices put the images side by side: image i's (rows, pixels) matrix is columns
// [i * pixels, (i + 1) * pixels) of the chunk's (rows, m * pixels). into_chunk copies an image's
// matrix in, out_of_chunk copies (and converts) it back out.
// The rows are a few values long (1, 4 or 16 pixels in ResNet-50's last stages), so they are
// copied inline, a single pixel as a plain assignment, rather than by a call to memmove each.
template <class T>
void into_chunk(const T* image, int64_t rows, int64_t pixels, int64_t i, int64_t m, T* chunk) {
  if (pixels == 1) {
    for (int64_t r = 0; r < rows; ++r) chunk[r * m + i] = image[r];
    return;
  }
  for (int64_t r = 0; r < rows; ++r) copy_short(image + r * pixels, pixels, chunk + (r * m + i) * pixels);
}

template <class T, class U>
void out_of_chunk(const T* chunk, int64_t rows, int64_t pixels, int64_t i, int64_t m, U* image) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* from = chunk + (r * m + i) * pixels;
    for (int64_t p = 0; p < pixels; ++p) image[r * pixels + p] = static_cast<U>(from[p]);
  }
}

// Whether an image's patches are the image itself: a 1x1 filter with stride 1 and no padding
// (two of every three convolutions of ResNet-50) reads each pixel once, in place, so the im2col
// matrix (C_in, H * W) is the image's (C_in, H, W) as it lies, and col2im is a copy.
bool patches_are_the_image(const Conv2dGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride == 1 && g.padding == 0;
}

// The patches of images [n0, n0 + m): a (patch, m * pixels) matrix, written into cols, or for
// one image whose patches are its pixels the image itself, not copied. `one` holds an image's
// patches on their way into a chunk of several.
template <class T>
const T* im2col_chunk(const T* x, int64_t n0, int64_t m, int64_t image_size, const Conv2dGeometry& g, T* one,
                      T* cols) {
  const bool in_place = patches_are_the_image(g);
  if (m == 1 && in_place) return x + n0 * image_size;
  if (m == 1) {
    im2col(x + n0 * image_size, g, cols);
    return cols;
  }
  for (int64_t i = 0; i < m; ++i) {
    const T* image = x + (n0 + i) * image_size;
    if (!in_place) im2col(image, g, one);
    into_chunk(in_place ? image : one, g.patch_size(), g.out_pixels(), i, m, cols);
  }
  return cols;
}

// Patches of at most this many values (a 3 x 3 filter over one channel) have their weight
// gradient's cols^T written out row by row for the GEMM.
constexpr int64_t kShortPatch = 16;

// out (cols, rows) = in (rows, cols)^T.
template <class T>
void transpose_into(const T* in, int64_t rows, int64_t cols, T* out) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) out[c * rows + r] = in[r * cols + c];
}

// A weight matrix that the GEMMs of every image (or chunk of images) of a batch multiply: (M, K)
// with the given strides. It is packed once here, so that those GEMMs skip packing it again
// (cpu::pack_gemm_a for f32 and f64, cpu::pack_gemm_bf16_a for bf16, each with the same bits
// as packing it every time); f16 weights go to gemm_16bit as they are. Shared read-only by the
// threads.
template <class T, class Acc>
class SharedWeights {
 public:
  SharedWeights(int64_t M, int64_t K, const T* A, int64_t rs, int64_t cs) {
    if constexpr (std::is_same_v<T, Acc>) {
      a_ = pack_gemm_a<T>(M, K, A, rs, cs);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      a_ = pack_gemm_bf16_a(M, K, A, rs, cs);
    } else {
      a_ = PackedGemmA<T>{M, K, A, rs, cs, {}};  // the operand alone, no panels
    }
  }

  // C = A B + beta C, sums in Acc: B is (K, N).
  void times(int64_t N, const T* B, int64_t b_rs, int64_t b_cs, Acc beta, Acc* C, int64_t ldc) const {
    if constexpr (std::is_same_v<T, Acc>) {
      gemm_packed_a<T>(a_, N, T(1), B, b_rs, b_cs, beta, C, ldc);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      gemm_bf16_packed_a(a_, N, 1.0f, B, b_rs, b_cs, beta, C, ldc);
    } else {
      gemm_into<T, Acc>(a_.M, N, a_.K, a_.A, a_.row_stride, a_.col_stride, B, b_rs, b_cs, beta, C, ldc);
    }
  }

 private:
  std::conditional_t<std::is_same_v<T, BFloat16>, PackedBf16A, PackedGemmA<T>> a_;
};

// Scratch memory that a kernel writes before it reads it: unlike std::vector<T>(n), not filled
// with zeros first (a chunk's patches are megabytes, written anew by every call).
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n) : data_(n > 0 ? new T[static_cast<size_t>(n)] : nullptr), size_(n) {}
  T* data() const { return data_.get(); }
  bool empty() const { return size_ <= 0; }

 private:
  std::unique_ptr<T[]> data_;
  int64_t size_;
};

// Where sums in Acc go: straight into the output `out` when it has that type (f32, f64), else
// into the f32 scratch `buffer`, which round_into later rounds into out.
template <class Acc, class T>
Acc* sums_for(T* out, const Scratch<Acc>& buffer) {
  if constexpr (std::is_same_v<T, Acc>) {
    return out;
  } else {
    return buffer.data();
  }
}

// Rounds n values of the f32 accumulator into the 16-bit out.
template <class T, class Acc>
void round_into(const Acc* acc, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(acc[i]);
}

}  // namespace

template <class T>
void im2col(const T* x, const Conv2dGeometry& g, T* cols) {
  const int64_t stride = g.stride, out_w = g.out_w, pixels = g.out_pixels(), shift = g.kernel_w * pixels;
  // With stride 1, segment oh of row (c, i, j) reads input row oh - p + i, as segment oh + 1 of
  // row (c, i - 1, j), kW rows before it, did. So a row with i > 0 is that row shifted by one
  // segment, one copy of (H_out - 1) W_out values, and only its last segment is read from x:
  // H_out + kH - 1 segments per (c, j) instead of kH H_out, and the per-segment work is what
  // im2col's time goes to (tests/bench/README.md).
  const auto first_segment = [&](int64_t row, int64_t i) -> int64_t {
    if (stride != 1 || i == 0) return 0;
    std::copy(cols + row - shift + out_w, cols + row - shift + pixels, cols + row);
    return g.out_h - 1;
  };
  for_each_segment(g, [&](int64_t col, int64_t in, int64_t lo, int64_t hi) {
    T* out = cols + col;
    const T* pixel = x + in;
    std::fill(out, out + lo, T(0));
    if (stride == 1) {
      copy_short(pixel, hi - lo, out + lo);
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow] = pixel[(ow - lo) * stride];
    }
    std::fill(out + hi, out + out_w, T(0));
  }, first_segment);
}

#ifdef __AVX512F__
namespace {

// col2im for stride 1 in f32 (every 16-bit convolution's input gradient too), one input row at a
// time: the row, 16 pixels per register, takes the kW segments that land on it from filter row i
// (x[c, ih, ow - p + j] += cols[(c, i, j), oh, ow] with ih = oh - p + i), so it is loaded and
// stored once per (i, oh) instead of once per segment, kW times as often, and a segment's values
// reach their lanes by an expanding load instead of pieces of 8, 4, 2 and 1 (tests/bench/README.md
// has the timings). Every pixel still receives
// its shares in the segment walk's order, i then j, so the sums are the same.
void col2im_rows(const float* cols, const Conv2dGeometry& g, float* x) {
  const int64_t W = g.width, H = g.height, p = g.padding, out_w = g.out_w, pixels = g.out_pixels();
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const int64_t ih = oh - p + i;
        if (ih < 0 || ih >= H) continue;
        float* row = x + (c * H + ih) * W;
        for (int64_t w0 = 0; w0 < W; w0 += 16) {
          const int64_t lanes = std::min<int64_t>(16, W - w0);
          const __mmask16 in_row = static_cast<__mmask16>((1u << lanes) - 1);
          __m512 sum = _mm512_maskz_loadu_ps(in_row, row + w0);
          for (int64_t j = 0; j < g.kernel_w; ++j) {
            // Lane l is pixel w0 + l, which takes output column ow = w0 + l + p - j: lanes
            // [first, last) have one inside [0, out_w).
            const int64_t first = std::max<int64_t>(0, j - p - w0);
            const int64_t last = std::min<int64_t>(lanes, out_w + j - p - w0);
            if (first >= last) continue;
            const __mmask16 m = static_cast<__mmask16>(((1u << (last - first)) - 1) << first);
            // The segment's values, from output column w0 + first + p - j on, into lanes m.
            const float* grad = cols + ((c * g.kernel_h + i) * g.kernel_w + j) * pixels + oh * out_w;
            const __m512 share = _mm512_maskz_expandloadu_ps(m, grad + w0 + first + p - j);
            sum = _mm512_mask_add_ps(sum, m, sum, share);
          }
          _mm512_mask_storeu_ps(row + w0, in_row, sum);
        }
      }
    }
  }
}

}  // namespace
#endif

template <class T>
void col2im(const T* cols, const Conv2dGeometry& g, T* x) {
  const int64_t stride = g.stride;
#ifdef __AVX512F__
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) return col2im_rows(cols, g, x);
  }
#endif
  for_each_segment(g, [&](int64_t col, int64_t in, int64_t lo, int64_t hi) {
    const T* grad = cols + col;
    T* pixel = x + in;
    if (stride == 1) {
      in_pieces(hi - lo, [&](int64_t k, auto count) {
        constexpr int n = decltype(count)::value;
        T sum[n];
        std::memcpy(sum, pixel + k, sizeof(sum));
        for (int i = 0; i < n; ++i) sum[i] += grad[lo + k + i];
        std::memcpy(pixel + k, sum, sizeof(sum));
      });
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) pixel[(ow - lo) * stride] += grad[ow];
    }
  });
}

template void im2col<float>(const float*, const Conv2dGeometry&, float*);
template void im2col<double>(const double*, const Conv2dGeometry&, double*);
template void im2col<Half>(const Half*, const Conv2dGeometry&, Half*);
template void im2col<BFloat16>(const BFloat16*, const Conv2dGeometry&, BFloat16*);
template void col2im<float>(const float*, const Conv2dGeometry&, float*);
template void col2im<double>(const double*, const Conv2dGeometry&, double*);

void conv2d_forward_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                           const Conv2dGeometry& g) {
  if (conv2d_runs_dense(g)) return conv2d_dense_forward(input, weight, bias, out, g);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  const int64_t image_size = g.channels * g.height * g.width;
  const int64_t per_chunk = images_per_product(pixels), chunks = (batch + per_chunk - 1) / per_chunk;
  dispatch_floating_and_16bit(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;  // f32 for 16-bit T: the GEMM sums, and the bias is added, in f32
    constexpr bool wide = std::is_same_v<T, Acc>;
    const T* x = input.data_ptr<T>();
    const T* w = weight.data_ptr<T>();  // (C_out, patch)
    const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    T* y = out.data_ptr<T>();
    const SharedWeights<T, Acc> weights(out_channels, patch, w, patch, 1);  // W: (C_out, patch)
    for_each_share(chunks, batch_shares(chunks), [&](int64_t first, int64_t last) {
      // (patch, m * pixels), reused for each chunk; not needed where the patches are the image.
      Scratch<T> cols(per_chunk == 1 && patches_are_the_image(g) ? 0 : patch * per_chunk * pixels);
      Scratch<T> one(per_chunk > 1 ? patch * pixels : 0);
      // The output is summed here first when it has 16 bits (rounded once) or when a chunk holds
      // several images (then copied out image by image): (C_out, m * pixels).
      Scratch<Acc> sums(wide && per_chunk == 1 ? 0 : out_channels * per_chunk * pixels);
      for (int64_t chunk = first; chunk < last; ++chunk) {
        const int64_t n0 = chunk * per_chunk, m = std::min(per_chunk, batch - n0), columns = m * pixels;
        T* y0 = y + n0 * out_channels * pixels;  // (m, C_out, pixels)
        Acc* acc = m == 1 ? sums_for(y0, sums) : sums.data();
        const T* patches = im2col_chunk(x, n0, m, image_size, g, one.data(), cols.data());
        // Each output channel starts as its bias; the GEMM adds W . cols onto it (beta = 1).
        if (b) {
          for (int64_t co = 0; co < out_channels; ++co)
            std::fill(acc + co * columns, acc + (co + 1) * columns, static_cast<Acc>(b[co]));
        }
        weights.times(columns, patches, columns, 1, Acc(b ? 1 : 0), acc, columns);
        if (m > 1) {
          for (int64_t i = 0; i < m; ++i) out_of_chunk(acc, out_channels, pixels, i, m, y0 + i * out_channels * pixels);
        } else if constexpr (!wide) {
          round_into(acc, out_channels * pixels, y0);
        }
      }
    });
  });
}

namespace {

// dW = the sum over the batch of dy . cols^T, in the fixed groups of weight_grad_groups and,
// within a group, chunks of images_per_chunk images: dy: (N, C_out, pixels), x: (N, C_in, H, W),
// dw: (C_out, patch).
template <class T, class Acc>
void weight_gradient(const T* dy, const T* x, T* dw, int64_t batch, int64_t out_channels, const Conv2dGeometry& g) {
  constexpr bool wide = std::is_same_v<T, Acc>;
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  const int64_t image_size = g.channels * g.height * g.width;
  const int64_t per_chunk = images_per_chunk(pixels), groups = weight_grad_groups(batch, per_chunk);
  // With several threads and at least one image per thread, the threads share out the groups
  // and each GEMM runs on one thread; otherwise the groups run one after another and each GEMM
  // uses every thread. Either way each group adds up the same products in the same order.
  const int threads = get_num_threads();
  const bool threads_take_groups = groups > 1 && threads > 1 && batch >= threads;
  // Each group sums dW over its own images into a partial sum, and the partial sums are added
  // into the total in group order. Groups run by several threads keep a partial each until
  // all are done; groups run one after another share one, added into the total as each group
  // ends: the same additions in the same order, without 16 copies of a large dW to fill.
  const int64_t weight_size = out_channels * patch;
  Scratch<Acc> total_buffer(wide ? 0 : weight_size);
  Acc* total = sums_for(dw, total_buffer);
  std::fill(total, total + weight_size, Acc(0));
  std::vector<std::vector<Acc>> partials(threads_take_groups ? groups : 1, std::vector<Acc>(weight_size));
  auto add_into_total = [&](const std::vector<Acc>& part) {
    for (int64_t k = 0; k < weight_size; ++k) total[k] += part[k];
  };
#pragma omp parallel if (threads_take_groups)
  {
    Scratch<T> cols(patch * per_chunk * pixels);  // (patch, m * pixels): a chunk's patches
    Scratch<T> cols_t(wide && patch <= kShortPatch ? patch * per_chunk * pixels : 0);  // cols^T
    Scratch<T> one(per_chunk > 1 ? patch * pixels : 0);
    // (C_out, m * pixels): the output gradients of a chunk of several images, side by side.
    Scratch<T> grads(per_chunk > 1 ? out_channels * per_chunk * pixels : 0);
#pragma omp for schedule(static)
    for (int64_t group = 0; group < groups; ++group) {
      std::vector<Acc>& partial = partials[threads_take_groups ? group : 0];
      // A group's own partial starts at zero as made; the shared one is emptied for each group.
      if (!threads_take_groups && group > 0) std::fill(partial.begin(), partial.end(), Acc(0));
      const int64_t end = batch * (group + 1) / groups;
      for (int64_t n0 = batch * group / groups; n0 < end; n0 += per_chunk) {
        const int64_t m = std::min(per_chunk, end - n0), columns = m * pixels;
        // dy of the chunk's images: (C_out, m * pixels).
        const T* dyc = dy + n0 * out_channels * pixels;
        if (m > 1) {
          for (int64_t i = 0; i < m; ++i)
            into_chunk(dy + (n0 + i) * out_channels * pixels, out_channels, pixels, i, m, grads.data());
          dyc = grads.data();
        }
        // dW += dy . cols^T; cols^T is cols read with its strides swapped, or, for patches short
        // enough to be one row of a GEMM tile (a first convolution's), cols^T written out, whose
        // contiguous rows the GEMM reads as they lie instead of packing both operands
        // (cpu::gemm's unpacked path; the sums are the same).
        const T* patches = im2col_chunk(x, n0, m, image_size, g, one.data(), cols.data());
        const T* cols_t_at = patches;  // cols^T: (m * pixels, patch)
        int64_t t_rs = 1, t_cs = columns;
        if (!cols_t.empty()) {
          transpose_into(patches, patch, columns, cols_t.data());
          cols_t_at = cols_t.data(), t_rs = patch, t_cs = 1;
        }
        gemm_into<T, Acc>(out_channels, patch, columns, dyc, columns, 1, cols_t_at, t_rs, t_cs, Acc(1), partial.data(),
                          patch);
      }
      if (!threads_take_groups) add_into_total(partial);
    }
  }
  // The threads' partial sums added in order: into dw itself for f32 and f64, into an f32
  // buffer rounded once for 16 bits.
  if (threads_take_groups) {
    for (const std::vector<Acc>& part : partials) add_into_total(part);
  }
  if constexpr (!wide) round_into(total, weight_size, dw);
}

// dX: each image's patches' gradient, W^T . dy, added back onto the pixels they came from
// (col2im). Each image's gradient is its own, so the batch is shared out as the forward pass
// shares it, in chunks of images_per_product images: dy: (N, C_out, pixels), w: (C_out, patch),
// dx: (N, C_in, H, W).
template <class T, class Acc>
void input_gradient(const T* dy, const T* w, T* dx, int64_t batch, int64_t out_channels, const Conv2dGeometry& g) {
  constexpr bool wide = std::is_same_v<T, Acc>;
  const int64_t patch = g.patch_size(), pixels = g.out_pixels();
  const int64_t image_size = g.channels * g.height * g.width;
  const int64_t per_chunk = images_per_product(pixels), chunks = (batch + per_chunk - 1) / per_chunk;
  // W^T: (patch, C_out), the weights as the patches' gradient multiplies them.
  const SharedWeights<T, Acc> weights_t(patch, out_channels, w, 1, patch);
  for_each_share(chunks, batch_shares(chunks), [&](int64_t first, int64_t last) {
    // (C_out, m * pixels): the output gradients of a chunk of several images, side by side.
    Scratch<T> grads(per_chunk > 1 ? out_channels * per_chunk * pixels : 0);
    // (patch, m * pixels): the patches' gradient, in T for f32 and f64, else in Acc; and for
    // 16 bits (C_in, H, W), an image's gradient in Acc. (patch, pixels): one image's patches'
    // gradient, out of a chunk of several.
    Scratch<T> cols(wide ? patch * per_chunk * pixels : 0);
    Scratch<Acc> grad_cols(wide ? 0 : patch * per_chunk * pixels), grad_image(wide ? 0 : image_size);
    Scratch<Acc> image_patches(per_chunk > 1 ? patch * pixels : 0);
    for (int64_t chunk = first; chunk < last; ++chunk) {
      const int64_t n0 = chunk * per_chunk, m = std::min(per_chunk, batch - n0), columns = m * pixels;
      const T* dyc = dy + n0 * out_channels * pixels;
      if (m > 1) {
        for (int64_t i = 0; i < m; ++i)
          into_chunk(dy + (n0 + i) * out_channels * pixels, out_channels, pixels, i, m, grads.data());
        dyc = grads.data();
      }
      if (m == 1 && patches_are_the_image(g)) {
        // The patches' gradient is the image's gradient: W^T . dy straight into it.
        T* image = dx + n0 * image_size;
        Acc* sums = sums_for(image, grad_image);
        weights_t.times(columns, dyc, columns, 1, Acc(0), sums, columns);
        if constexpr (!wide) round_into(sums, image_size, image);
        continue;
      }
      // The gradient of every patch, then added back onto the pixels it came from.
      Acc* patches = sums_for(cols.data(), grad_cols);
      weights_t.times(columns, dyc, columns, 1, Acc(0), patches, columns);
      for (int64_t i = 0; i < m; ++i) {
        // Patches that are the image: its gradient is its columns of the chunk's, as they are.
        if (patches_are_the_image(g)) {
          out_of_chunk(patches, patch, pixels, i, m, dx + (n0 + i) * image_size);
          continue;
        }
        const Acc* mine = patches;
        if (m > 1) {
          out_of_chunk(patches, patch, pixels, i, m, image_patches.data());
          mine = image_patches.data();
        }
        Acc* image = sums_for(dx + (n0 + i) * image_size, grad_image);
        std::fill(image, image + image_size, Acc(0));
        col2im(mine, g, image);
        if constexpr (!wide) round_into(image, image_size, dx + (n0 + i) * image_size);
      }
    }
  });
}

}  // namespace

void conv2d_backward_kernel(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const Tensor& grad_input, const Tensor& grad_weight, const Conv2dGeometry& g) {
  if (conv2d_runs_dense(g)) return conv2d_dense_backward(grad_out, input, weight, grad_input, grad_weight, g);
  const int64_t batch = input.size(0), out_channels = weight.size(0);
  dispatch_floating_and_16bit(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = opmath_t<T>;  // f32 for 16-bit T: dW's sums and the patches' gradients stay f32
    const T* dy = grad_out.data_ptr<T>();
    if (grad_weight.defined()) {
      weight_gradient<T, Acc>(dy, input.data_ptr<T>(), grad_weight.data_ptr<T>(), batch, out_channels, g);
    }
    if (grad_input.defined()) {
      input_gradient<T, Acc>(dy, weight.data_ptr<T>(), grad_input.data_ptr<T>(), batch, out_channels, g);
    }
  });
}

}  // namespace lockstep::cpu
