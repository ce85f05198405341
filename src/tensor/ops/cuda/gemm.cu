// GEMM on a CUDA device, for `batch` products of strided operands (gemm.h describes them):
//   A_p: (M, K), B_p: (K, N), C_p: (M, N) with contiguous rows;  C_p = alpha A_p B_p + beta C_p.
// CPU reference: cpu::gemm (src/tensor/ops/cpu/gemm.cpp). Two backends compute it:
//
// 1. cuBLAS. cuBLAS thinks in column-major matrices, Lockstep in row-major ones. The bridge is
//    that a row-major (M x N) matrix with row stride ld has exactly the bytes of a column-major
//    (N x M) matrix with leading dimension ld: its transpose. So we ask cuBLAS for
//        C^T = B^T A^T      (column-major, N x M)
//    which is C (row-major, M x N). Each of B^T and A^T is handed over as it is stored: with
//    CUBLAS_OP_N if the operand's columns are contiguous (col stride 1), with CUBLAS_OP_T if its
//    rows are (row stride 1: a transposed view), or, if neither stride is 1, after a copy into a
//    contiguous buffer.
//
// 2. A shared-memory tiled kernel, written for reading (tiled_gemm below). Each block
//    of 256 threads computes a 64 x 64 tile of C; each thread 4 x 4 of its elements.
//
// 16-bit operands (f16, bf16) always go to cuBLAS, whatever the backend: cublasGemmStridedBatchedEx
// with f16 or bf16 A and B, an f32 C and CUBLAS_COMPUTE_32F runs on the tensor cores, which
// multiply 16-bit pairs exactly and add in f32, as cpu::gemm_16bit does. The tiled kernel,
// which teaches blocking, has no tensor-core version. CPU reference: cpu::gemm_16bit
// (src/tensor/ops/cpu/gemm_16bit.cpp).
#include "tensor/ops/cuda/gemm.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "tensor/ops/cuda/launch.cuh"
#include "core/dtype.h"

namespace lockstep::cuda {

namespace {

// One batched GEMM problem, as gemm_batched received it: operands A and B of element type T,
// and C, alpha and beta of type Acc, which is T itself for f32 and f64 and float for the
// 16-bit types (their products are summed, and stored, in f32).
template <class T, class Acc = T>
struct GemmProblem {
  int64_t batch, M, N, K;
  Acc alpha, beta;
  const T* A;
  int64_t a_batch, a_row, a_col;
  const T* B;
  int64_t b_batch, b_row, b_col;
  Acc* C;
  int64_t c_batch, c_row;
};

// ---------------------------------------------------------------------------------------------
// Choosing the backend

GemmBackend backend_from_environment() {
  const char* value = std::getenv("LOCKSTEP_GEMM");
  if (value == nullptr) return GemmBackend::Cublas;
  const std::string name = value;
  if (name == "cublas") return GemmBackend::Cublas;
  if (name == "tiled") return GemmBackend::Tiled;
  LOCKSTEP_FAIL("LOCKSTEP_GEMM=", name, " is not a GEMM backend: use LOCKSTEP_GEMM=cublas or "
                "LOCKSTEP_GEMM=tiled (or leave it unset for cuBLAS)");
}

// The process-wide choice; the environment is read when it is first needed.
std::atomic<GemmBackend>& backend_setting() {
  static std::atomic<GemmBackend> setting{backend_from_environment()};
  return setting;
}

// ---------------------------------------------------------------------------------------------
// Small helper kernels

// C_p = beta * C_p for every product: the whole answer when K == 0 or alpha == 0. beta == 0
// writes zeros without reading C, which may hold NaN. One thread per element of C.
template <class T, class Acc>
__global__ void scale_output(GemmProblem<T, Acc> g) {
  const int64_t total = g.batch * g.M * g.N;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t p = e / (g.M * g.N), i = e / g.N % g.M, j = e % g.N;
    Acc* c = g.C + p * g.c_batch + i * g.c_row + j;
    *c = g.beta == Acc(0) ? Acc(0) : g.beta * *c;
  }
}

// dst (batch, rows, cols), contiguous = src read through its strides. One thread per element,
// neighbouring threads along dst's rows, so the writes are coalesced.
template <class T>
__global__ void pack_operand(const T* src, int64_t batch_stride, int64_t row_stride, int64_t col_stride,
                            int64_t batch, int64_t rows, int64_t cols, T* dst) {
  const int64_t total = batch * rows * cols;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t p = e / (rows * cols), i = e / cols % rows, j = e % cols;
    dst[e] = src[p * batch_stride + i * row_stride + j * col_stride];
  }
}

// ---------------------------------------------------------------------------------------------
// Backend 1: cuBLAS

// The cuBLAS handles, one per (device, stream), created on first use and kept for the whole run
// (destroying them at exit could run after the CUDA driver has shut down). One per stream, not
// one per device: a handle runs its GEMMs in its own workspace memory, and two streams running
// GEMMs at the same time (chapter 3's replicas sharing a GPU) must not share one. Each handle is
// bound to its stream once, so no thread ever changes another thread's stream. The mutex guards
// the table, and is held until the GEMM is queued (microseconds; the GPU work runs later).
std::mutex cublas_mutex;
std::map<std::pair<int, cudaStream_t>, cublasHandle_t> cublas_handles;

// Must be called with cublas_mutex held and `device` current.
cublasHandle_t cublas_handle(Device device, cudaStream_t stream) {
  const auto found = cublas_handles.find({device.index(), stream});
  if (found != cublas_handles.end()) return found->second;
  cublasHandle_t handle = nullptr;
  LOCKSTEP_CUBLAS_CHECK(cublasCreate(&handle));
  LOCKSTEP_CUBLAS_CHECK(cublasSetStream(handle, stream));
  cublas_handles[{device.index(), stream}] = handle;
  return handle;
}

// How cuBLAS reads an operand X (rows x cols, strides rs and cs) so that it sees X^T, a
// column-major (cols x rows) matrix:
// - cols contiguous (cs == 1): X^T *is* column-major with leading dimension rs: CUBLAS_OP_N.
// - rows contiguous (rs == 1): X is column-major (rows x cols, leading dimension cs), and cuBLAS
//   transposes it for us: CUBLAS_OP_T.
// A stride along a dimension of size 1 is never used, so it does not matter; but cuBLAS insists
// that the leading dimension is at least the stored matrix's row count, so then we pick one
// that is. Returns nothing when neither works (e.g. every other row and column of a matrix,
// or a stride of 0 from broadcasting): the operand must be copied first.
struct CublasOperand {
  cublasOperation_t op;
  int64_t ld;
};

std::optional<CublasOperand> as_cublas_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    if (ld >= std::max<int64_t>(1, cols)) return CublasOperand{CUBLAS_OP_N, ld};
  }
  if (rs == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    if (ld >= std::max<int64_t>(1, rows)) return CublasOperand{CUBLAS_OP_T, ld};
  }
  return std::nullopt;
}

// Makes an operand readable by cuBLAS: if as_cublas_operand refuses its strides, copies it into
// `buffer` (contiguous, row-major) and points the operand there. A batch stride of 0 (one matrix
// for every product) stays 0 and only that matrix is copied. A 16-bit element is moved as the
// device type with its bits (launch.cuh's device_type_t).
template <class T>
void make_readable(Device device, int64_t batch, int64_t rows, int64_t cols, const T*& data, int64_t& batch_stride,
                   int64_t& rs, int64_t& cs, Tensor& buffer) {
  if (as_cublas_operand(rows, cols, rs, cs)) return;
  using D = device_type_t<T>;
  const int64_t copies = batch_stride == 0 ? 1 : batch;
  buffer = empty({copies, rows, cols}, TensorOptions().dtype(dtype_of<T>::value).device(device));
  T* packed = buffer.data_ptr<T>();
  pack_operand<D><<<grid_size(copies * rows * cols), kBlockSize, 0, stream_for(device)>>>(
      reinterpret_cast<const D*>(data), batch_stride, rs, cs, copies, rows, cols, reinterpret_cast<D*>(packed));
  LOCKSTEP_CUDA_CHECK_LAUNCH();
  data = packed;
  batch_stride = batch_stride == 0 ? 0 : rows * cols;
  rs = cols;
  cs = 1;
}

// cuBLAS takes sizes and leading dimensions as int.
int to_cublas_int(int64_t value, const char* what) {
  LOCKSTEP_CHECK(value <= INT_MAX, "matmul on CUDA: ", what, " = ", value,
                 " is larger than cuBLAS accepts (2^31 - 1); use the tiled backend (cuda::set_gemm_backend)");
  return static_cast<int>(value);
}

// cuBLAS's name for a 16-bit element type.
template <class T>
constexpr cudaDataType_t cublas_data_type() {
  static_assert(std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, "only the 16-bit types go to cublasGemmEx");
  return std::is_same_v<T, Half> ? CUDA_R_16F : CUDA_R_16BF;
}

template <class T, class Acc>
void cublas_gemm(Device device, GemmProblem<T, Acc> g) {
  // Copies of operands cuBLAS cannot read as they are; they live until the GEMM is queued, and
  // the caching allocator hands their memory out again only to work queued after it.
  Tensor a_buffer, b_buffer;
  make_readable(device, g.batch, g.M, g.K, g.A, g.a_batch, g.a_row, g.a_col, a_buffer);
  make_readable(device, g.batch, g.K, g.N, g.B, g.b_batch, g.b_row, g.b_col, b_buffer);
  const CublasOperand a = *as_cublas_operand(g.M, g.K, g.a_row, g.a_col);
  const CublasOperand b = *as_cublas_operand(g.K, g.N, g.b_row, g.b_col);
  // C is row-major with contiguous rows, i.e. column-major C^T with leading dimension c_row.
  const int64_t ldc = g.M == 1 ? std::max<int64_t>(1, g.N) : g.c_row;

  // C^T (N x M) = B^T (N x K) A^T (K x M): cuBLAS's m, n, k are N, M, K, and B comes first.
  const int m = to_cublas_int(g.N, "N"), n = to_cublas_int(g.M, "M"), k = to_cublas_int(g.K, "K");
  const int lda = to_cublas_int(b.ld, "B's leading dimension");
  const int ldb = to_cublas_int(a.ld, "A's leading dimension");
  const int ldc_int = to_cublas_int(ldc, "C's row stride"), batch = to_cublas_int(g.batch, "the batch size");

  std::lock_guard<std::mutex> lock(cublas_mutex);
  const cublasHandle_t handle = cublas_handle(device, stream_for(device));
  // cuBLAS's default math mode computes f32 GEMMs in full f32 (no TF32 tensor cores), so the
  // result matches the CPU's to rounding.
  if constexpr (std::is_same_v<T, float>) {
    LOCKSTEP_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, b.op, a.op, m, n, k, &g.alpha, g.B, lda, g.b_batch, g.A,
                                                    ldb, g.a_batch, &g.beta, g.C, ldc_int, g.c_batch, batch));
  } else if constexpr (std::is_same_v<T, double>) {
    LOCKSTEP_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, b.op, a.op, m, n, k, &g.alpha, g.B, lda, g.b_batch, g.A,
                                                    ldb, g.a_batch, &g.beta, g.C, ldc_int, g.c_batch, batch));
  } else {
    // 16-bit A and B, f32 C, alpha and beta, f32 sums: the tensor cores' mixed-precision GEMM.
    // CUBLAS_GEMM_DEFAULT lets cuBLAS pick a tensor-core algorithm (the _TENSOR_OP variants
    // are deprecated aliases of it).
    static_assert(std::is_same_v<Acc, float>, "16-bit operands give an f32 result");
    LOCKSTEP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, b.op, a.op, m, n, k, &g.alpha, g.B, cublas_data_type<T>(), lda, g.b_batch, g.A,
        cublas_data_type<T>(), ldb, g.a_batch, &g.beta, g.C, CUDA_R_32F, ldc_int, g.c_batch, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

// ---------------------------------------------------------------------------------------------
// Backend 2: the tiled kernel
//
// A naive GEMM gives each thread one C(i, j) and lets it read row i of A and column j of B from
// global memory: 2K loads for 2K flops. Every element of A is then read N times and every
// element of B M times, and the kernel waits on memory. Tiling fixes that in two levels:
//
// - Shared memory. A block computes a kTileM x kTileN tile of C. It walks along K in slabs of
//   kTileK: all its threads together copy the slab of A (kTileM x kTileK) and of B (kTileK x
//   kTileN) from global into shared memory once, then every thread reads them from there.
//   Each global element is now loaded once per block instead of once per thread.
// - Registers. Each thread computes a kMicroM x kMicroN patch of the tile. For each k of the
//   slab it loads kMicroM values of A's column and kMicroN of B's row into registers and
//   forms their outer product: 4 + 4 shared-memory reads for 16 fused multiply-adds.
//
// Thread (ty, tx) of the 16 x 16 block owns the tile's rows ty, ty + 16, ty + 32, ty + 48 and
// columns tx, tx + 16, tx + 32, tx + 48: spread out rather than a 4 x 4 square, so that the 16
// threads with one ty read 16 consecutive shared-memory words (no bank conflicts) and write 16
// consecutive elements of a row of C (coalesced).
//! [tiled gemm]
constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
constexpr int kThreadsM = 16, kThreadsN = 16;
constexpr int kMicroM = kTileM / kThreadsM, kMicroN = kTileN / kThreadsN;
constexpr int kTiledThreads = kThreadsM * kThreadsN;

// Grid: x = the tiles of C (tiles_n per row of tiles), z = products of the batch (each block
// loops over them with the stride gridDim.z, since gridDim.z is at most 65535).
template <class T>
__global__ void __launch_bounds__(kTiledThreads) tiled_gemm(GemmProblem<T> g, int64_t tiles_n) {
  // The slabs in shared memory, both stored k-major: a_tile[k][m] = A(row0 + m, k0 + k) and
  // b_tile[k][n] = B(k0 + k, col0 + n). The +1 column staggers the rows across memory banks,
  // so the loads below do not conflict when they walk down a column.
  __shared__ T a_tile[kTileK][kTileM + 1];
  __shared__ T b_tile[kTileK][kTileN + 1];

  // Step 1: this block's tile of C and this thread's place in it.
  const int64_t row0 = blockIdx.x / tiles_n * kTileM;
  const int64_t col0 = blockIdx.x % tiles_n * kTileN;
  const int tx = threadIdx.x % kThreadsN, ty = threadIdx.x / kThreadsN;
  // The loads in step 2 let neighbouring threads take neighbouring elements along an operand's
  // unit stride, so that a warp reads consecutive addresses (one wide memory transaction).
  const bool a_k_fastest = g.a_col == 1, b_n_fastest = g.b_col == 1;

  for (int64_t p = blockIdx.z; p < g.batch; p += gridDim.z) {
    const T* A = g.A + p * g.a_batch;
    const T* B = g.B + p * g.b_batch;
    T acc[kMicroM][kMicroN] = {};

    for (int64_t k0 = 0; k0 < g.K; k0 += kTileK) {
      // Step 2: the block copies the slabs A(row0.., k0..) and B(k0.., col0..) into shared
      // memory, each thread kTileM * kTileK / 256 = 4 elements of each. Elements past the
      // edge of a matrix (the last tiles when M, N or K is not a multiple of the tile) are
      // stored as 0, so they add nothing to the sums below.
      for (int e = threadIdx.x; e < kTileM * kTileK; e += kTiledThreads) {
        const int m = a_k_fastest ? e / kTileK : e % kTileM;
        const int k = a_k_fastest ? e % kTileK : e / kTileM;
        const int64_t i = row0 + m, kk = k0 + k;
        a_tile[k][m] = i < g.M && kk < g.K ? A[i * g.a_row + kk * g.a_col] : T(0);
      }
      for (int e = threadIdx.x; e < kTileK * kTileN; e += kTiledThreads) {
        const int n = b_n_fastest ? e % kTileN : e / kTileK;
        const int k = b_n_fastest ? e / kTileN : e % kTileK;
        const int64_t kk = k0 + k, j = col0 + n;
        b_tile[k][n] = kk < g.K && j < g.N ? B[kk * g.b_row + j * g.b_col] : T(0);
      }
      // Wait until the whole slab is in shared memory before anyone reads it.
      __syncthreads();

      // Step 3: each thread adds the slab's contribution to its 4 x 4 accumulators: for each
      // k, the outer product of 4 values of A's column k with 4 values of B's row k.
#pragma unroll
      for (int k = 0; k < kTileK; ++k) {
        T a[kMicroM], b[kMicroN];
#pragma unroll
        for (int i = 0; i < kMicroM; ++i) a[i] = a_tile[k][ty + i * kThreadsM];
#pragma unroll
        for (int j = 0; j < kMicroN; ++j) b[j] = b_tile[k][tx + j * kThreadsN];
#pragma unroll
        for (int i = 0; i < kMicroM; ++i) {
#pragma unroll
          for (int j = 0; j < kMicroN; ++j) acc[i][j] += a[i] * b[j];
        }
      }
      // Wait until everyone is done with the slab before the next one overwrites it.
      __syncthreads();
    }

    // Step 4: write the thread's elements of C that lie inside the matrix. C is read only when
    // beta != 0: with beta == 0 it may hold garbage (or NaN, which 0 * NaN would keep).
    T* C = g.C + p * g.c_batch;
#pragma unroll
    for (int i = 0; i < kMicroM; ++i) {
#pragma unroll
      for (int j = 0; j < kMicroN; ++j) {
        const int64_t row = row0 + ty + i * kThreadsM, col = col0 + tx + j * kThreadsN;
        if (row < g.M && col < g.N) {
          T* c = C + row * g.c_row + col;
          *c = g.beta == T(0) ? g.alpha * acc[i][j] : g.alpha * acc[i][j] + g.beta * *c;
        }
      }
    }
  }
}
//! [tiled gemm]

template <class T>
void tiled_gemm(Device device, const GemmProblem<T>& g) {
  const int64_t tiles_m = (g.M + kTileM - 1) / kTileM, tiles_n = (g.N + kTileN - 1) / kTileN;
  LOCKSTEP_CHECK(tiles_m * tiles_n <= INT_MAX, "matmul on CUDA: a ", g.M, " x ", g.N,
                 " result has too many tiles for the tiled GEMM kernel's grid; use cuBLAS (cuda::set_gemm_backend)");
  const dim3 grid(static_cast<unsigned int>(tiles_m * tiles_n), 1,
                  static_cast<unsigned int>(std::min<int64_t>(g.batch, 65535)));
  tiled_gemm<T><<<grid, kTiledThreads, 0, stream_for(device)>>>(g, tiles_n);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------------
// The entry point shared by all the public functions.

template <class T, class Acc = T>
void run_gemm(Device device, const GemmProblem<T, Acc>& g) {
  LOCKSTEP_CHECK(g.batch >= 0 && g.M >= 0 && g.N >= 0 && g.K >= 0, "cuda::gemm: sizes must be non-negative, got batch ",
                 g.batch, ", M ", g.M, ", N ", g.N, ", K ", g.K);
  LOCKSTEP_CHECK(g.M <= 1 || g.c_row >= g.N, "cuda::gemm: C's row stride ", g.c_row,
                 " is smaller than its row length N = ", g.N, ", so rows would overlap");
  // An empty C: nothing to compute.
  if (g.batch == 0 || g.M == 0 || g.N == 0) return;
  // No products to add (K == 0, or alpha == 0): only beta scales C, and A and B are not read.
  if (g.K == 0 || g.alpha == Acc(0)) {
    scale_output<T, Acc><<<grid_size(g.batch * g.M * g.N), kBlockSize, 0, stream_for(device)>>>(g);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
    return;
  }
  if constexpr (std::is_same_v<T, Acc>) {
    if (gemm_backend() == GemmBackend::Tiled) {
      tiled_gemm(device, g);
      return;
    }
  }
  cublas_gemm(device, g);
}

}  // namespace

void set_gemm_backend(GemmBackend backend) { backend_setting().store(backend); }

GemmBackend gemm_backend() { return backend_setting().load(); }

void gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t a_row_stride,
          int64_t a_col_stride, const float* B, int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
          int64_t c_row_stride) {
  run_gemm<float>(current_device(), {1, M, N, K, alpha, beta, A, 0, a_row_stride, a_col_stride, B, 0, b_row_stride, b_col_stride,
                           C, 0, c_row_stride});
}

void gemm(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t a_row_stride,
          int64_t a_col_stride, const double* B, int64_t b_row_stride, int64_t b_col_stride, double beta, double* C,
          int64_t c_row_stride) {
  run_gemm<double>(current_device(), {1, M, N, K, alpha, beta, A, 0, a_row_stride, a_col_stride, B, 0, b_row_stride,
                            b_col_stride, C, 0, c_row_stride});
}

void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t a_batch_stride, int64_t a_row_stride, int64_t a_col_stride, const float* B,
                  int64_t b_batch_stride, int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
                  int64_t c_batch_stride, int64_t c_row_stride) {
  run_gemm<float>(current_device(), {batch, M, N, K, alpha, beta, A, a_batch_stride, a_row_stride, a_col_stride, B,
                           b_batch_stride, b_row_stride, b_col_stride, C, c_batch_stride, c_row_stride});
}

void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t a_batch_stride, int64_t a_row_stride, int64_t a_col_stride, const double* B,
                  int64_t b_batch_stride, int64_t b_row_stride, int64_t b_col_stride, double beta, double* C,
                  int64_t c_batch_stride, int64_t c_row_stride) {
  run_gemm<double>(current_device(), {batch, M, N, K, alpha, beta, A, a_batch_stride, a_row_stride, a_col_stride, B,
                            b_batch_stride, b_row_stride, b_col_stride, C, c_batch_stride, c_row_stride});
}

void gemm(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_row_stride,
          int64_t a_col_stride, const BFloat16* B, int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
          int64_t c_row_stride) {
  run_gemm<BFloat16, float>(current_device(), {1, M, N, K, alpha, beta, A, 0, a_row_stride, a_col_stride, B, 0,
                                               b_row_stride, b_col_stride, C, 0, c_row_stride});
}

void gemm(int64_t M, int64_t N, int64_t K, float alpha, const Half* A, int64_t a_row_stride, int64_t a_col_stride,
          const Half* B, int64_t b_row_stride, int64_t b_col_stride, float beta, float* C, int64_t c_row_stride) {
  run_gemm<Half, float>(current_device(), {1, M, N, K, alpha, beta, A, 0, a_row_stride, a_col_stride, B, 0,
                                           b_row_stride, b_col_stride, C, 0, c_row_stride});
}

void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
                  int64_t a_batch_stride, int64_t a_row_stride, int64_t a_col_stride, const BFloat16* B,
                  int64_t b_batch_stride, int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
                  int64_t c_batch_stride, int64_t c_row_stride) {
  run_gemm<BFloat16, float>(current_device(), {batch, M, N, K, alpha, beta, A, a_batch_stride, a_row_stride,
                                               a_col_stride, B, b_batch_stride, b_row_stride, b_col_stride, C,
                                               c_batch_stride, c_row_stride});
}

void gemm_batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const Half* A,
                  int64_t a_batch_stride, int64_t a_row_stride, int64_t a_col_stride, const Half* B,
                  int64_t b_batch_stride, int64_t b_row_stride, int64_t b_col_stride, float beta, float* C,
                  int64_t c_batch_stride, int64_t c_row_stride) {
  run_gemm<Half, float>(current_device(), {batch, M, N, K, alpha, beta, A, a_batch_stride, a_row_stride, a_col_stride,
                                           B, b_batch_stride, b_row_stride, b_col_stride, C, c_batch_stride,
                                           c_row_stride});
}

}  // namespace lockstep::cuda
