// The bf16 GEMM on AMX tiles: the blocked algorithm of gemm_bf16_pairs.h with a 32 x 32 block
// of C in four accumulator tiles.
//
// Tiles 0-3 hold C's block (rows 0-15 and 16-31, columns 0-15 and 16-31), tiles 4-5 the two
// 16-row tiles of A, tiles 6-7 the two 16-column tiles of B. Each step along K loads 16 pair
// words (32 k values) of each and runs four `tdpbf16ps`:
//
//   C[0] += A[0] B[0]   C[1] += A[0] B[1]   C[2] += A[1] B[0]   C[3] += A[1] B[1]
//
// A tile of A is 16 packed rows of 16 words (pack_a_pair_rows); a tile of B is 16 pair rows of
// a packed B panel, 16 of its 32 columns, so it is loaded with the panel's row stride of 128
// bytes. K is padded with zero words to a multiple of 16 pairs: a zero pair adds 0 to every sum.
#include "tensor/ops/cpu/gemm_bf16_amx.h"

#include <algorithm>

#ifdef LOCKSTEP_HAVE_AMX_KERNEL
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace lockstep::cpu::gemm_detail {

#ifdef LOCKSTEP_HAVE_AMX_KERNEL

namespace {

// The tile instructions, written out: GCC's intrinsics for them do not tell the compiler that a
// tile store writes memory, so it could read the stored block before the store. Tile numbers
// are part of the instruction, hence macros.
#define LOCKSTEP_TILE_LOAD(tile, base, stride) \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #tile ::"r"(base), "r"(static_cast<int64_t>(stride)) : "memory")
#define LOCKSTEP_TILE_STORE(tile, base, stride) \
  asm volatile("tilestored %%tmm" #tile ", (%0,%1,1)" ::"r"(base), "r"(static_cast<int64_t>(stride)) : "memory")
#define LOCKSTEP_TILE_ZERO(tile) asm volatile("tilezero %%tmm" #tile ::)
// tile c += tile a * tile b (AT&T operand order: b, a, c).
#define LOCKSTEP_TILE_DOT(c, a, b) asm volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

// Rows and bytes per row of each tile register, as `ldtilecfg` reads them: all eight tiles are
// 16 rows of 64 bytes (16 f32 values, or 16 pair words).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// Side of the block of C that the four tiles hold.
constexpr int64_t kBlock = 32;

// ab (32 x 32, row-major) = the packed rows a (`padded` words each) times the packed panel b, over
// `padded` pairs. With `kLowerRows` false the rows 16-31 are left out (ab's lower half is not
// written), with `kRightColumns` false the columns 16-31.
template <bool kLowerRows, bool kRightColumns>
void tile_block(int64_t padded, const uint32_t* a, const uint32_t* b, float* ab) {
  const int64_t a_stride = padded * 4, b_stride = kPanelColumns * 4;
  LOCKSTEP_TILE_ZERO(0);
  if (kRightColumns) LOCKSTEP_TILE_ZERO(1);
  if (kLowerRows) LOCKSTEP_TILE_ZERO(2);
  if (kLowerRows && kRightColumns) LOCKSTEP_TILE_ZERO(3);
  for (int64_t q = 0; q < padded; q += 16) {
    LOCKSTEP_TILE_LOAD(4, a + q, a_stride);
    LOCKSTEP_TILE_LOAD(6, b + q * kPanelColumns, b_stride);
    LOCKSTEP_TILE_DOT(0, 4, 6);
    if (kRightColumns) {
      LOCKSTEP_TILE_LOAD(7, b + q * kPanelColumns + 16, b_stride);
      LOCKSTEP_TILE_DOT(1, 4, 7);
    }
    if (kLowerRows) {
      LOCKSTEP_TILE_LOAD(5, a + 16 * padded + q, a_stride);
      LOCKSTEP_TILE_DOT(2, 5, 6);
      if (kRightColumns) LOCKSTEP_TILE_DOT(3, 5, 7);
    }
  }
  const int64_t ab_stride = kBlock * 4;
  LOCKSTEP_TILE_STORE(0, ab, ab_stride);
  if (kRightColumns) LOCKSTEP_TILE_STORE(1, ab + 16, ab_stride);
  if (kLowerRows) LOCKSTEP_TILE_STORE(2, ab + 16 * kBlock, ab_stride);
  if (kLowerRows && kRightColumns) LOCKSTEP_TILE_STORE(3, ab + 16 * kBlock + 16, ab_stride);
}

// C(i, j) = alpha * ab(i, j) + beta * C(i, j) for the mr x nr corner of a block, C's rows ldc
// apart and contiguous.
LOCKSTEP_AVX512_BF16 void store_block(int64_t mr, int64_t nr, const float* ab, float alpha, float beta, float* c,
                                      int64_t ldc) {
  for (int64_t i = 0; i < mr; ++i) {
    for (int64_t j = 0; j < nr; j += 16)
      store_lanes(c + i * ldc + j, std::min<int64_t>(16, nr - j), _mm512_loadu_ps(ab + i * kBlock + j), alpha, beta);
  }
}

// The AMX kernel for gemm_pairs. A slice of K is up to 512 values: a packed 32-row panel of A
// and a packed B panel are then 32 KiB each, in a 48 KiB L1d and a 2 MiB L2.
struct AmxBf16Kernel {
  static constexpr int64_t kMR = kBlock;
  static constexpr int64_t kMC = 192;
  static constexpr int64_t kKC = 512;
  static constexpr int64_t kNC = 4064;

  static int64_t padded_pairs(int64_t pairs) { return round_up(pairs, 16); }

  static void pack_a(int64_t mc, int64_t kc, int64_t padded, const BFloat16* A, int64_t rs, int64_t cs,
                     uint32_t* out) {
    pack_a_pair_rows(mc, kc, round_up(mc, kMR), padded, A, rs, cs, out);
  }

  // C(mc x nc) = alpha * packed_a * packed_b + beta * C, one 32 x 32 block at a time, each
  // computed in the tiles it needs (an edge block of at most 16 rows or columns needs fewer),
  // stored to ab and from there, with alpha and beta, into C (element (i, j) at C[i * c_rs +
  // j * c_cs]). The tile registers are set up on entry and released on exit, so that a thread
  // holds AMX state only while it multiplies.
  static void multiply(int64_t mc, int64_t nc, int64_t kc, float alpha, const uint32_t* packed_a,
                       const uint32_t* packed_b, float beta, float* C, int64_t c_rs, int64_t c_cs) {
    const int64_t padded = padded_pairs(ceil_div(kc, 2));
    static const TileConfig config;
    asm volatile("ldtilecfg %0" ::"m"(config));
    alignas(64) float ab[kBlock * kBlock];
    for (int64_t jr = 0; jr < nc; jr += kBlock) {
      const int64_t nr = std::min(kBlock, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += kBlock) {
        const int64_t mr = std::min(kBlock, mc - ir);
        const uint32_t* a = packed_a + ir * padded;
        const uint32_t* b = packed_b + jr * padded;
        if (mr > 16 && nr > 16) tile_block<true, true>(padded, a, b, ab);
        else if (mr > 16) tile_block<true, false>(padded, a, b, ab);
        else if (nr > 16) tile_block<false, true>(padded, a, b, ab);
        else tile_block<false, false>(padded, a, b, ab);
        float* c = C + ir * c_rs + jr * c_cs;
        if (c_cs == 1) store_block(mr, nr, ab, alpha, beta, c, c_rs);
        else update_tile<float>(mr, nr, ab, kBlock, alpha, beta, c, c_rs, c_cs);
      }
    }
    asm volatile("tilerelease" ::);
  }
};

}  // namespace

float amx_dot_chains(int64_t iterations) {
  static const TileConfig config;
  asm volatile("ldtilecfg %0" ::"m"(config));
  LOCKSTEP_TILE_ZERO(0);
  LOCKSTEP_TILE_ZERO(1);
  LOCKSTEP_TILE_ZERO(2);
  LOCKSTEP_TILE_ZERO(3);
  LOCKSTEP_TILE_ZERO(4);
  LOCKSTEP_TILE_ZERO(5);
  LOCKSTEP_TILE_ZERO(6);
  LOCKSTEP_TILE_ZERO(7);
  for (int64_t i = 0; i < iterations; ++i) {
    LOCKSTEP_TILE_DOT(0, 4, 6);
    LOCKSTEP_TILE_DOT(1, 4, 7);
    LOCKSTEP_TILE_DOT(2, 5, 6);
    LOCKSTEP_TILE_DOT(3, 5, 7);
  }
  alignas(64) float sums[16 * 16];
  LOCKSTEP_TILE_STORE(0, sums, 64);
  asm volatile("tilerelease" ::);
  return sums[0];
}

bool amx_bf16_usable() {
  static const bool usable = [] {
    // CPUID leaf 7, subleaf 0, EDX: bit 22 AMX-BF16, bit 24 AMX-TILE (asked directly: not every
    // compiler's __builtin_cpu_supports knows these names).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if (!(edx & (1u << 22)) || !(edx & (1u << 24))) return false;
    // Linux's arch_prctl request for the tile data's state component (XFEATURE_XTILEDATA, 18).
    constexpr int kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr int kTileData = 18;
    return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
  }();
  return usable;
}

void gemm_amx_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_row_stride,
                   int64_t a_col_stride, const BFloat16* B, int64_t b_row_stride, int64_t b_col_stride, float beta,
                   float* C, int64_t c_row_stride) {
  gemm_pairs<AmxBf16Kernel>(M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride, b_col_stride, beta, C,
                            c_row_stride);
}

void prepack_amx_bf16(int64_t M, int64_t K, const BFloat16* A, int64_t a_row_stride, int64_t a_col_stride,
                      PackedBf16A& packed) {
  prepack_pairs<AmxBf16Kernel>(M, K, A, a_row_stride, a_col_stride, packed);
}

void gemm_amx_bf16_prepacked(const PackedBf16A& prepacked, int64_t M, int64_t N, int64_t K, float alpha,
                             const BFloat16* A, int64_t a_row_stride, int64_t a_col_stride, const BFloat16* B,
                             int64_t b_row_stride, int64_t b_col_stride, float beta, float* C, int64_t c_row_stride) {
  gemm_pairs_prepacked<AmxBf16Kernel>(prepacked, M, N, K, alpha, A, a_row_stride, a_col_stride, B, b_row_stride,
                                      b_col_stride, beta, C, c_row_stride);
}

#else

bool amx_bf16_usable() { return false; }

#endif  // LOCKSTEP_HAVE_AMX_KERNEL

}  // namespace lockstep::cpu::gemm_detail
