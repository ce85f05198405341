/// \file
/// A cache-blocked CPU GEMM in the style of GotoBLAS and BLIS.
///
/// The naive triple loop `C(i,j) += A(i,k) * B(k,j)` is limited by memory, not arithmetic:
/// each multiply-add needs fresh operands from far-away memory. The fix is to reuse every
/// number many times while it sits in a fast cache or register. We do that with five
/// nested loops around a tiny "micro-kernel":
///
///     for jc in steps of NC:            B block  (KC x NC)  lives in L3
///       for pc in steps of KC:            pack B(pc:pc+KC, jc:jc+NC) into NR-wide panels
///         for ic in steps of MC:          A block  (MC x KC)  lives in L2
///           pack A(ic:ic+MC, pc:pc+KC) into MR-tall panels
///           for jr in steps of NR:        B panel  (KC x NR)  lives in L1
///             for ir in steps of MR:      A panel  (MR x KC)  streams from L2
///               micro-kernel: C(MR x NR tile) += A panel * B panel, in registers
///
/// The micro-kernel keeps an MR x NR tile of C in registers for the whole KC-long sum,
/// so each value loaded from the packed panels is used NR (or MR) times. Three other paths
/// (choose_path) serve the products this does not suit: a plain loop for tiny ones, C^T =
/// B^T A^T for ones much narrower than a tile, and the same tiles without packing where K
/// or N is so short that packing costs more than the arithmetic. The last three sum each
/// element of C in the same order, over the same slices of K, so which of them runs changes
/// the speed and never the bits (tests/unit/test_gemm.cpp checks it).
/// References: Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication"
/// (2008); Van Zee & van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS
/// Functionality" (2015).
#include "tensor/ops/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "tensor/ops/cpu/gemm_blocking.h"

namespace lockstep::cpu {
namespace {

// The blocking helpers this file shares with the other GEMMs (gemm_blocking.h): ceil_div,
// round_up, gemm_threads, scratch and update_tile.
using namespace gemm_detail;

// ---------------------------------------------------------------------------------------
// Blocking parameters.
//
// Register tile MR x NR: MR rows of two vector registers each. The accumulators must fit
// in the registers with room for one broadcast A value and the NR-wide row of B: 6 x 2 =
// 12 accumulator registers + 2 for B + 1 for A = 15, which fits AVX2's 16 registers of
// 256 bits (NR = 16 floats) and AVX-512's 32 of 512 bits (NR = 32 floats). Twelve
// independent accumulators also hide the FMA latency: two FMA pipes x 4 cycles latency
// needs >= 8 FMAs in flight. For double a register holds half as many values, so NR is 8
// or 16. (On NEON's 32 x 128-bit registers the AVX2 shapes also fit.) With AVX-512 the
// same loop does twice the work per instruction (tests/bench/README.md has the measurements).
//
// Cache blocks, for a core with 32 KiB L1d, 1 MiB L2 and a shared 32 MiB L3:
//  - KC: one KC x NR panel of B must stay in L1 while all the A panels stream past it:
//        256 x 16 floats = 16 KiB, half of L1, leaving room for the A panel (6 KiB).
//        With AVX-512 the panel doubles to 32 KiB; the CPUs that have AVX-512 mostly have
//        48 KiB of L1d, where a smaller KC is slower.
//  - MC: the packed MC x KC block of A must stay in L2 while it is swept once per B
//        panel; 144 x 256 floats = 144 KiB leaves most of L2 for the B panels and C
//        lines passing through (GotoBLAS's rule of thumb is to fill no more than about half
//        of L2).
//  - NC: the KC x NC block of B is shared by all cores via L3: 256 x 4064 floats = 4 MiB
//        (4064 = 127 x 32 is a multiple of every NR, so only the last block has an edge
//        panel).
// For double the KC x NR panel of B holds the same bytes as for float, and MC = 72 keeps
// the A block at the same 144 KiB.

// The width of the vector registers the micro-kernel is written for, in bytes: 64 where
// the compiler may use AVX-512 (-march=native on a CPU that has it), 32 where it may use AVX
// or on other targets (ARM's NEON runs each as a pair of 16-byte instructions, in registers
// enough for the tile), and 16 on an x86-64 limited to SSE (a portable build,
// LOCKSTEP_NATIVE=OFF): there the 12 accumulators of 32 bytes would need 24 of its 16
// registers, and spilling them to memory would make the GEMM many times slower.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__x86_64__) && !defined(__AVX__)
constexpr int kVectorBytes = 16;
#else
constexpr int kVectorBytes = 32;
#endif

template <class T>
struct Blocking;

template <>
struct Blocking<float> {
  static constexpr int kMR = 6;
  static constexpr int kNR = 2 * kVectorBytes / static_cast<int>(sizeof(float));
  static constexpr int64_t kMC = 144;
  static constexpr int64_t kKC = 256;
  static constexpr int64_t kNC = 4064;
};

template <>
struct Blocking<double> {
  static constexpr int kMR = 6;
  static constexpr int kNR = 2 * kVectorBytes / static_cast<int>(sizeof(double));
  static constexpr int64_t kMC = 72;
  static constexpr int64_t kKC = 256;
  static constexpr int64_t kNC = 4064;
};

// Below this many multiply-adds (M * N * K) packing and waking threads cost more than
// they save, so we use a plain loop.
constexpr int64_t kSmallProblem = 32 * 1024;

// C = beta * C, the whole answer when there is nothing to multiply (K == 0 or alpha == 0).
template <class T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) c[j] = beta == T(0) ? T(0) : beta * c[j];
  }
}

// The small-problem path: one dot product per element of C, straight from the strided
// operands. No packing, no threads.
template <class T>
void gemm_direct(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t a_rs,
                 int64_t a_cs, const T* B, int64_t b_rs, int64_t b_cs, T beta, T* C,
                 int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += A[i * a_rs + k * a_cs] * B[k * b_rs + j * b_cs];
      T& c = C[i * ldc + j];
      c = beta == T(0) ? alpha * sum : alpha * sum + beta * c;
    }
  }
}

// Packs the mc x kc block of A starting at `A` into consecutive MR-row panels. Inside a
// panel the MR values of one column k are adjacent, so the micro-kernel reads the panel
// front to back. Rows past mc are zero, so edge panels need no special case later.
template <class T>
void pack_a(int64_t mc, int64_t kc, const T* A, int64_t rs, int64_t cs, T* out) {
  constexpr int MR = Blocking<T>::kMR;
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t mr = std::min<int64_t>(MR, mc - ir);
    const T* a = A + ir * rs;
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < mr; ++i) out[i] = a[i * rs + p * cs];
      for (int64_t i = mr; i < MR; ++i) out[i] = T(0);
      out += MR;
    }
  }
}

// A vector of kVectorBytes of T (one SSE, AVX2 or AVX-512 register), written with the
// GCC/Clang vector extension: `+` and `*` on it compile to SIMD instructions on any target
// (on ARM's 128-bit NEON, to pairs of instructions).
template <class T>
struct Simd {
  typedef T Vec __attribute__((vector_size(kVectorBytes)));
  static constexpr int kWidth = kVectorBytes / sizeof(T);
};

// The source element of lane e when two vectors of W lanes are interleaved in blocks of h
// lanes: a's block, then b's, then a's next but one, and so on, starting at a's first block
// (high == false) or its second (high == true). Indices 0..W-1 name a's lanes, W..2W-1 b's.
constexpr int interleave_source(int W, int h, bool high, int e) {
  const int pair = e / (2 * h), within = e % (2 * h);
  const int lane = 2 * h * pair + within % h + (high ? h : 0);
  return within < h ? lane : W + lane;
}

// (Vectors pass by reference: returning one by value would change the calling convention
// with the instruction set, which GCC warns about where AVX is not enabled.) GCC before 12
// lacks __builtin_shufflevector; its own __builtin_shuffle takes the indices as a vector of
// integers as wide as the elements.
template <int W, int H, bool High, class Vec, size_t... E>
void interleave(const Vec& a, const Vec& b, Vec& out, std::index_sequence<E...>) {
#if defined(__clang__) || __GNUC__ >= 12
  out = __builtin_shufflevector(a, b, interleave_source(W, H, High, static_cast<int>(E))...);
#else
  using Lane = std::conditional_t<sizeof(a[0]) == 4, int32_t, int64_t>;
  typedef Lane Indices __attribute__((vector_size(sizeof(Vec))));
  out = __builtin_shuffle(a, b, Indices{interleave_source(W, H, High, static_cast<int>(E))...});
#endif
}

// Transposes the W x W block held in v[0..W) (v[i] is row i) in place, in log2(W) rounds:
// round h swaps the off-diagonal h x h blocks of every 2h x 2h block, by interleaving rows
// i and i + h in blocks of h lanes. For W = 16 that is 64 shuffles for 256 values, where
// moving them one at a time takes 256 loads and 256 stores.
template <class T, int H = 1>
void transpose_in_registers(typename Simd<T>::Vec* v) {
  using Vec = typename Simd<T>::Vec;
  constexpr int W = Simd<T>::kWidth;
  if constexpr (H < W) {
#pragma GCC unroll 16
    for (int i = 0; i < W; ++i) {
      if (i & H) continue;
      Vec low, high;
      interleave<W, H, false>(v[i], v[i + H], low, std::make_index_sequence<W>());
      interleave<W, H, true>(v[i], v[i + H], high, std::make_index_sequence<W>());
      v[i] = low;
      v[i + H] = high;
    }
    transpose_in_registers<T, 2 * H>(v);
  }
}

// Packs one kc x NR panel of B (the nr <= NR valid columns starting at `B`): for each k,
// the NR values of row k are adjacent. Columns past nr are zero.
template <class T>
void pack_b_panel(int64_t nr, int64_t kc, const T* B, int64_t rs, int64_t cs, T* out) {
  constexpr int NR = Blocking<T>::kNR;
  int64_t p = 0;
  // A B that is a transposed row-major matrix (rs == 1: a weight gradient's cols^T, a linear
  // layer's W^T) keeps each column's k values together, and the panel wants each row's NR
  // values together: a transpose. Square blocks of W x W values are loaded a column per
  // vector, transposed in registers and stored a row per vector.
  if (rs == 1 && nr == NR) {
    using S = Simd<T>;
    constexpr int W = S::kWidth;
    for (; p + W <= kc; p += W) {
      for (int half = 0; half < NR / W; ++half) {
        typename S::Vec v[W];
#pragma GCC unroll 16
        for (int j = 0; j < W; ++j) std::memcpy(&v[j], B + (half * W + j) * cs + p, sizeof(v[j]));
        transpose_in_registers<T>(v);
#pragma GCC unroll 16
        for (int i = 0; i < W; ++i) std::memcpy(out + (p + i) * NR + half * W, &v[i], sizeof(v[i]));
      }
    }
  }
  // The general case, and what is left of the fast one: one value at a time.
  for (; p < kc; ++p) {
    const T* b = B + p * rs;
    T* row = out + p * NR;
    for (int64_t j = 0; j < nr; ++j) row[j] = b[j * cs];
    for (int64_t j = nr; j < NR; ++j) row[j] = T(0);
  }
}

// The first `lanes` values of a vector at `from` (the rest zero), and their store back: a whole
// vector where lanes is the width, else masked moves with AVX-512 (and a copy of lanes values
// elsewhere), which touch no memory past the last lane.
template <class T, class Vec>
void load_lanes(const T* from, int64_t lanes, Vec& v) {
  if (lanes == static_cast<int64_t>(sizeof(Vec) / sizeof(T))) {
    std::memcpy(&v, from, sizeof(Vec));
    return;
  }
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 r = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << lanes) - 1), from);
    std::memcpy(&v, &r, sizeof(Vec));
    return;
  } else {
    const __m512d r = _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << lanes) - 1), from);
    std::memcpy(&v, &r, sizeof(Vec));
    return;
  }
#endif
  v = Vec{};
  std::memcpy(&v, from, lanes * sizeof(T));
}

template <class T, class Vec>
void store_lanes(T* to, int64_t lanes, const Vec& v) {
  if (lanes == static_cast<int64_t>(sizeof(Vec) / sizeof(T))) {
    std::memcpy(to, &v, sizeof(Vec));
    return;
  }
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    __m512 r;
    std::memcpy(&r, &v, sizeof(Vec));
    _mm512_mask_storeu_ps(to, static_cast<__mmask16>((1u << lanes) - 1), r);
    return;
  } else {
    __m512d r;
    std::memcpy(&r, &v, sizeof(Vec));
    _mm512_mask_storeu_pd(to, static_cast<__mmask8>((1u << lanes) - 1), r);
    return;
  }
#endif
  std::memcpy(to, &v, lanes * sizeof(T));
}

// C = alpha * acc + beta * C for the mr x nr part of an MR x (NV vectors) tile of C with row
// stride ldc and contiguous rows: the same formula as update_tile, a vector at a time; beta == 0
// must not read C. Only the first mr rows and nr columns are C's.
template <class T, int NV>
__attribute__((always_inline)) inline void store_tile(const typename Simd<T>::Vec (&acc)[Blocking<T>::kMR][NV], T alpha, T beta, T* c, int64_t ldc,
                int64_t mr, int64_t nr) {
  using S = Simd<T>;
  using Vec = typename S::Vec;
  constexpr int MR = Blocking<T>::kMR;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) continue;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int64_t lanes = std::min<int64_t>(S::kWidth, nr - v * S::kWidth);
      if (lanes <= 0) continue;
      T* out = c + i * ldc + v * S::kWidth;
      Vec result = alpha * acc[i][v];
      if (beta != T(0)) {
        Vec old;
        load_lanes(out, lanes, old);
        result = alpha * acc[i][v] + beta * old;
      }
      store_lanes(out, lanes, result);
    }
  }
}

// The micro-kernel: C = alpha * (MR x kc panel of A) * (kc x NR panel of B) + beta * C, for
// the mr x nr part of one MR x NR tile of C (an edge tile is computed whole on the panels' zero
// padding, and only its real part stored) with row stride ldc and contiguous rows; both panels
// are packed.
// Each step p is a rank-1 update: row p of the B panel (NR values, NV vectors) times each of
// the MR values of column p of the A panel. The accumulator `acc` has constant bounds, so it
// lives in MR * NV registers, and each B vector is loaded once per step and then used MR
// times. Only at the end is C touched, one vector at a time.
//
// Vectors rather than plain `T acc[MR][NR]` arrays, because compilers do not map such arrays
// onto registers this way; and noinline, because inlined into the macro-kernel GCC runs short
// of registers and re-reads B from memory for every FMA (the call costs nothing next to the
// kc-long loop). tests/bench/README.md has the measurements.
template <class T>
__attribute__((noinline)) void micro_kernel(int64_t kc, const T* __restrict a,
                                            const T* __restrict b, T alpha, T beta,
                                            T* __restrict c, int64_t ldc, int64_t mr, int64_t nr) {
  using S = Simd<T>;
  using Vec = typename S::Vec;
  constexpr int MR = Blocking<T>::kMR;
  constexpr int NR = Blocking<T>::kNR;
  constexpr int NV = NR / S::kWidth;
  Vec acc[MR][NV] = {};
  for (int64_t p = 0; p < kc; ++p) {
    Vec b_row[NV];
    // memcpy moves bytes between T arrays and vectors with no alignment or aliasing
    // assumptions; the compiler turns each one into a single vector load (or store).
    for (int v = 0; v < NV; ++v) std::memcpy(&b_row[v], b + v * S::kWidth, sizeof(Vec));
    // a[i] * vector broadcasts the scalar to every lane; with FMA hardware the compiler
    // fuses the multiply and the add into one instruction.
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] += a[i] * b_row[v];
    a += MR;
    b += NR;
  }
  store_tile<T, NV>(acc, alpha, beta, c, ldc, mr, nr);
}

// The macro-kernel: C(mc x nc) = alpha * packed_a * packed_b + beta * C, one MR x NR
// tile at a time; C's element (i, j) is C[i * c_rs + j * c_cs]. The jr loop is outside the
// ir loop so that one B panel stays in L1 while the whole A block streams past it from L2.
template <class T>
void macro_kernel(int64_t mc, int64_t nc, int64_t kc, T alpha, const T* packed_a,
                  const T* packed_b, T beta, T* C, int64_t c_rs, int64_t c_cs) {
  constexpr int MR = Blocking<T>::kMR;
  constexpr int NR = Blocking<T>::kNR;
  alignas(64) T ab[MR * NR];
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t nr = std::min<int64_t>(NR, nc - jr);
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t mr = std::min<int64_t>(MR, mc - ir);
      T* c = C + ir * c_rs + jr * c_cs;
      // Ask for the C tile now; it arrives from L2/L3 while the micro-kernel computes.
      for (int64_t i = 0; i < mr; ++i) __builtin_prefetch(c + i * c_rs, 1);
      const T* a = packed_a + ir * kc;
      const T* b = packed_b + jr * kc;
      if (c_cs == 1) {
        micro_kernel(kc, a, b, alpha, beta, c, c_rs, mr, nr);
      } else {
        // A transposed C: compute the tile into `ab`, then update C element by element.
        micro_kernel(kc, a, b, T(1), T(0), ab, NR, MR, NR);
        update_tile(mr, nr, ab, NR, alpha, beta, c, c_rs, c_cs);
      }
    }
  }
}

// The micro-kernel's sum without packing, for products whose packing costs more than their
// arithmetic (a first convolution's, whose patches have 9 values: K = 9 forward, N = 9 for
// the weight gradient): A is read where it lies, a[i * a_rs + p * a_cs], and so are B's rows,
// b + p * b_rs, whose columns are contiguous (the last tile's masked). NV vectors of columns:
// one where N fits in one. Each element of C is the same chain of multiply-adds over p as in
// micro_kernel, and is stored by the same store_tile, so the bits are the same.
template <class T, int NV>
__attribute__((noinline)) void unpacked_tile(int64_t kc, const T* a, int64_t a_rs, int64_t a_cs, int64_t mr, const T* b, int64_t b_rs,
                   int64_t nr, T alpha, T beta, T* c, int64_t ldc) {
  using S = Simd<T>;
  using Vec = typename S::Vec;
  constexpr int MR = Blocking<T>::kMR;
  // Rows past mr repeat the last row, so every read is inside A; their sums are not stored.
  const T* rows[MR];
  for (int i = 0; i < MR; ++i) rows[i] = a + std::min<int64_t>(i, mr - 1) * a_rs;
  // Columns in the last vector: all W, or fewer, read masked. Two loops rather than a test in
  // one, which would make GCC keep the accumulators in memory.
  const int64_t tail = nr - (NV - 1) * S::kWidth;
  auto sweep = [&](auto masked) {
    Vec acc[MR][NV] = {};
    for (int64_t p = 0; p < kc; ++p) {
      const T* b_p = b + p * b_rs;
      Vec b_row[NV];
      for (int v = 0; v + 1 < NV; ++v) std::memcpy(&b_row[v], b_p + v * S::kWidth, sizeof(Vec));
      if constexpr (decltype(masked)::value) {
        load_lanes(b_p + (NV - 1) * S::kWidth, tail, b_row[NV - 1]);
      } else {
        std::memcpy(&b_row[NV - 1], b_p + (NV - 1) * S::kWidth, sizeof(Vec));
      }
      for (int i = 0; i < MR; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] += rows[i][p * a_cs] * b_row[v];
    }
    store_tile<T, NV>(acc, alpha, beta, c, ldc, mr, nr);
  };
  if (tail == S::kWidth) {
    sweep(std::false_type());
  } else {
    sweep(std::true_type());
  }
}

// K in slices of at most KC, all about the same length: K = 288 becomes 144 + 144 rather
// than 256 + 32, whose second pass over C would do little arithmetic for its memory traffic.
template <class T>
int64_t k_slice(int64_t K) {
  return ceil_div(K, ceil_div(K, Blocking<T>::kKC));
}

// The unpacked path: C = alpha A B + beta C with unpacked_tile, for B whose rows are contiguous
// (b_cs == 1) and C whose rows are. K is cut into gemm_blocked's slices, and each slice's sums
// are added onto C in turn, as there; the threads share out MR-row panels.
template <class T>
void gemm_unpacked(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t a_rs, int64_t a_cs, const T* B,
                   int64_t b_rs, T beta, T* C, int64_t ldc) {
  constexpr int MR = Blocking<T>::kMR;
  constexpr int NR = Blocking<T>::kNR;
  constexpr int W = Simd<T>::kWidth;
  const int64_t kc_max = k_slice<T>(K);
  const int threads = gemm_threads();
  const int64_t panels = ceil_div(M, MR);
  for (int64_t pc = 0; pc < K; pc += kc_max) {
    const int64_t kc = std::min(kc_max, K - pc);
    // Only the first slice of K sees the caller's beta; later slices accumulate.
    const T beta_here = pc == 0 ? beta : T(1);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && panels > 1)
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int64_t ir = panel * MR, mr = std::min<int64_t>(MR, M - ir);
      for (int64_t jr = 0; jr < N; jr += NR) {
        const int64_t nr = std::min<int64_t>(NR, N - jr);
        const T* a = A + ir * a_rs + pc * a_cs;
        const T* b = B + pc * b_rs + jr;
        T* c = C + ir * ldc + jr;
        if (nr <= W) {
          unpacked_tile<T, 1>(kc, a, a_rs, a_cs, mr, b, b_rs, nr, alpha, beta_here, c, ldc);
        } else {
          unpacked_tile<T, NR / W>(kc, a, a_rs, a_cs, mr, b, b_rs, nr, alpha, beta_here, c, ldc);
        }
      }
    }
  }
}

// Where gemm_blocked finds the packed panels of A for rows [ic, ...) of the K slice that starts
// at pc and is kc long, in a whole A packed by pack_gemm_a: slice after slice (each slice but
// the last k_slice long), each slice's MR-row panels one after another.
template <class T>
const T* packed_a_block(const T* panels, int64_t M, int64_t pc, int64_t ic, int64_t kc) {
  return panels + pc * round_up(M, Blocking<T>::kMR) + ic * kc;
}

// The blocked algorithm of the file comment, for C whose element (i, j) is
// C[i * c_rs + j * c_cs]. With `prepacked_a` (from pack_gemm_a) A is not packed again.
template <class T>
void gemm_blocked(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t a_row_stride,
                  int64_t a_col_stride, const T* B, int64_t b_row_stride, int64_t b_col_stride,
                  T beta, T* C, int64_t c_rs, int64_t c_cs, const T* prepacked_a = nullptr) {
  constexpr int MR = Blocking<T>::kMR;
  constexpr int NR = Blocking<T>::kNR;
  constexpr int64_t MC = Blocking<T>::kMC;
  constexpr int64_t NC = Blocking<T>::kNC;

  // Split the M rows into blocks of at most MC rows, and into a multiple of the thread
  // count so that on an idle machine every thread gets the same number of equally tall
  // blocks. E.g. with 2 threads M = 2048 becomes 16 blocks of 128 rows, 8 per thread,
  // rather than 14 blocks of 144 plus one of 32 (8 blocks for one thread, 7 for the other).
  const int threads = gemm_threads();
  int64_t row_blocks = round_up(ceil_div(M, MC), threads);
  row_blocks = std::min(row_blocks, ceil_div(M, MR));
  const int64_t mc_max = round_up(ceil_div(M, row_blocks), MR);
  row_blocks = ceil_div(M, mc_max);

  const int64_t kc_max = k_slice<T>(K);
  const int64_t nc_max = std::min(NC, round_up(N, NR));

  // One packed B block shared by all threads: it is the big one (up to KC x NC), it lives
  // in the shared L3, and packing it once avoids every thread re-reading B from memory.
  static thread_local std::vector<T> packed_b_buffer;
  T* const packed_b = scratch(packed_b_buffer, kc_max * nc_max);

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    // Each thread packs its own A blocks into a private buffer that stays in its own L2.
    static thread_local std::vector<T> packed_a_buffer;
    T* const packed_a = prepacked_a ? nullptr : scratch(packed_a_buffer, mc_max * kc_max);
    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc);
      for (int64_t pc = 0; pc < K; pc += kc_max) {
        const int64_t kc = std::min(kc_max, K - pc);
        // Only the first slice of K sees the caller's beta; later slices accumulate.
        const T beta_here = pc == 0 ? beta : T(1);

        // All threads pack B together, one NR-wide panel each at a time. The implicit
        // barrier at the end of the loop means nobody reads B before it is complete.
#pragma omp for schedule(static)
        for (int64_t jr = 0; jr < nc; jr += NR) {
          pack_b_panel(std::min<int64_t>(NR, nc - jr), kc,
                       B + pc * b_row_stride + (jc + jr) * b_col_stride, b_row_stride,
                       b_col_stride, packed_b + jr * kc);
        }

        // Each thread takes whole row blocks: pack that slice of A, then multiply. Blocks
        // are handed out as threads become free, so a thread slowed down by another
        // program on its core simply takes fewer. The implicit barrier at the end keeps
        // B from being repacked while still in use.
#pragma omp for schedule(dynamic)
        for (int64_t block = 0; block < row_blocks; ++block) {
          const int64_t ic = block * mc_max;
          const int64_t mc = std::min(mc_max, M - ic);
          const T* a_block = packed_a;
          if (prepacked_a) {
            a_block = packed_a_block(prepacked_a, M, pc, ic, kc);
          } else {
            pack_a(mc, kc, A + ic * a_row_stride + pc * a_col_stride, a_row_stride, a_col_stride, packed_a);
          }
          macro_kernel(mc, nc, kc, alpha, a_block, packed_b, beta_here, C + ic * c_rs + jc * c_cs, c_rs, c_cs);
        }
      }
    }
  }
}

// How many multiply-adds the tiles compute for an M x N product, zero padding included.
template <class T>
int64_t padded_work(int64_t M, int64_t N) {
  return round_up(M, Blocking<T>::kMR) * round_up(N, Blocking<T>::kNR);
}

// gemm's choice of path for an M x N x K product.
enum class GemmPath { kDirect, kUnpacked, kBlocked, kTransposed };

// K up to this is short enough for the unpacked path: a 3 x 3 patch of one channel.
constexpr int64_t kUnpackedMaxK = 16;

template <class T>
GemmPath choose_path(int64_t M, int64_t N, int64_t K, int64_t b_col_stride) {
  if (M * N * K < kSmallProblem) return GemmPath::kDirect;
  // Packing copies (M + N) x K values so that each is then used N or M times from cache. With
  // K tiny (a first convolution's forward pass) or N within one vector (its weight gradient),
  // the copies cost more than the arithmetic they serve, and B with contiguous rows can be
  // read as it lies.
  if (b_col_stride == 1 && (K <= kUnpackedMaxK || N <= Simd<T>::kWidth)) return GemmPath::kUnpacked;
  // A product much narrower than a tile (a 32 x 9 weight gradient, NR = 32) would spend most
  // of every tile's arithmetic on zero padding. C^T = B^T A^T has the same elements, each
  // summed in the same order, so where it pads less we compute that instead. (Only where
  // there are enough rows of C^T to give every thread a row block.)
  const bool transpose = padded_work<T>(N, M) * 4 < padded_work<T>(M, N) * 3 &&
                         ceil_div(N, Blocking<T>::kMR) >= gemm_threads();
  return transpose ? GemmPath::kTransposed : GemmPath::kBlocked;
}

}  // namespace

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha,
          const T* A, int64_t a_row_stride, int64_t a_col_stride,
          const T* B, int64_t b_row_stride, int64_t b_col_stride,
          T beta, T* C, int64_t c_row_stride) {
  if (M <= 0 || N <= 0) return;
  // Nothing to multiply: the product is zero, so only the beta * C part remains.
  if (K <= 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, c_row_stride);
    return;
  }
  switch (choose_path<T>(M, N, K, b_col_stride)) {
    case GemmPath::kDirect:
      gemm_direct(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
                  c_row_stride);
      break;
    case GemmPath::kUnpacked:
      gemm_unpacked(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, beta, C, c_row_stride);
      break;
    case GemmPath::kTransposed:
      // A and B swap places with their strides swapped, and C is written transposed.
      gemm_blocked(N, M, K, alpha, B, b_col_stride, b_row_stride, A, a_col_stride, a_row_stride, beta, C,
                   int64_t(1), c_row_stride);
      break;
    case GemmPath::kBlocked:
      gemm_blocked(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
                   c_row_stride, int64_t(1));
      break;
  }
}

template <class T>
PackedGemmA<T> pack_gemm_a(int64_t M, int64_t K, const T* A, int64_t a_row_stride, int64_t a_col_stride) {
  PackedGemmA<T> packed{M, K, A, a_row_stride, a_col_stride, {}};
  if (M <= 0 || K <= 0) return packed;
  // Every K slice as gemm_blocked cuts it, all M rows of it in MR-row panels.
  const int64_t kc_max = k_slice<T>(K);
  packed.panels.resize(round_up(M, Blocking<T>::kMR) * K);
  for (int64_t pc = 0; pc < K; pc += kc_max) {
    const int64_t kc = std::min(kc_max, K - pc);
    pack_a(M, kc, A + pc * a_col_stride, a_row_stride, a_col_stride,
           packed.panels.data() + pc * round_up(M, Blocking<T>::kMR));
  }
  return packed;
}

template <class T>
void gemm_packed_a(const PackedGemmA<T>& A, int64_t N, T alpha, const T* B, int64_t b_row_stride,
                   int64_t b_col_stride, T beta, T* C, int64_t c_row_stride) {
  // The panels serve only gemm_blocked's own path; the others read A as it is.
  if (A.M <= 0 || N <= 0 || A.K <= 0 || alpha == T(0) ||
      choose_path<T>(A.M, N, A.K, b_col_stride) != GemmPath::kBlocked) {
    gemm(A.M, N, A.K, alpha, A.A, A.row_stride, A.col_stride, B, b_row_stride, b_col_stride, beta, C,
         c_row_stride);
    return;
  }
  gemm_blocked(A.M, N, A.K, alpha, A.A, A.row_stride, A.col_stride, B, b_row_stride, b_col_stride, beta, C,
               c_row_stride, int64_t(1), A.panels.data());
}

template void gemm<float>(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                          const float*, int64_t, int64_t, float, float*, int64_t);
template void gemm<double>(int64_t, int64_t, int64_t, double, const double*, int64_t,
                           int64_t, const double*, int64_t, int64_t, double, double*,
                           int64_t);
template PackedGemmA<float> pack_gemm_a<float>(int64_t, int64_t, const float*, int64_t, int64_t);
template PackedGemmA<double> pack_gemm_a<double>(int64_t, int64_t, const double*, int64_t, int64_t);
template void gemm_packed_a<float>(const PackedGemmA<float>&, int64_t, float, const float*, int64_t, int64_t,
                                   float, float*, int64_t);
template void gemm_packed_a<double>(const PackedGemmA<double>&, int64_t, double, const double*, int64_t, int64_t,
                                    double, double*, int64_t);

}  // namespace lockstep::cpu
