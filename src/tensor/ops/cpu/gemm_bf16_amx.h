/// \file
/// The bf16 GEMM on Intel's AMX tiles (Advanced Matrix Extensions, Xeon since Sapphire Rapids):
/// eight tile registers of up to 16 rows x 64 bytes, and one instruction, `tdpbf16ps`, that
/// multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile of B (as 16 rows of 16 pair words) into
/// a 16 x 16 f32 tile of C: 8,192 multiply-adds where one `vdpbf16ps` does 32. Internal to
/// gemm_bf16.cpp, which calls it only where `amx_bf16_usable()` says so.
#pragma once

#include <cstdint>

#include "core/half.h"
#include "tensor/ops/cpu/gemm_bf16_pairs.h"

#if defined(LOCKSTEP_HAVE_AVX512_BF16_KERNEL) && defined(__linux__)
/// Defined where the AMX kernel is built: x86-64 Linux (the tiles need the kernel's permission).
#define LOCKSTEP_HAVE_AMX_KERNEL 1
#endif

namespace lockstep::cpu::gemm_detail {

/// Whether the CPU has AMX-BF16 and Linux lets this process use the tile registers, asked once
/// (a process must ask for them, `arch_prctl(ARCH_REQ_XCOMP_PERM)`, before its first tile
/// instruction; Linux 5.16 and later grant it).
bool amx_bf16_usable();

#ifdef LOCKSTEP_HAVE_AMX_KERNEL
/// `gemm_bf16`'s contract (gemm_bf16.h) on AMX tiles, for M, N, K > 0 and alpha != 0: C is
/// computed in 32 x 32 blocks of four 16 x 16 tiles, K 32 values at a time.
void gemm_amx_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t a_row_stride,
                   int64_t a_col_stride, const BFloat16* B, int64_t b_row_stride, int64_t b_col_stride, float beta,
                   float* C, int64_t c_row_stride);

/// Packs A into `packed` for many gemm_amx_bf16 products (gemm_bf16.h's pack_gemm_bf16_a).
void prepack_amx_bf16(int64_t M, int64_t K, const BFloat16* A, int64_t a_row_stride, int64_t a_col_stride,
                      PackedBf16A& packed);

/// gemm_amx_bf16 with A prepacked by prepack_amx_bf16 from the same A: the same results, bit for bit.
void gemm_amx_bf16_prepacked(const PackedBf16A& prepacked, int64_t M, int64_t N, int64_t K, float alpha,
                             const BFloat16* A, int64_t a_row_stride, int64_t a_col_stride, const BFloat16* B,
                             int64_t b_row_stride, int64_t b_col_stride, float beta, float* C, int64_t c_row_stride);

/// The AMX peak kernel of peak_flops.h: `iterations` rounds of four `tdpbf16ps` into four
/// independent accumulator tiles, from tiles of zeros; returns a value read from the sums.
/// Only where `amx_bf16_usable()`.
float amx_dot_chains(int64_t iterations);
#endif

}  // namespace lockstep::cpu::gemm_detail
