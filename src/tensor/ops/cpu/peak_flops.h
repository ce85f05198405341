/// \file
/// The CPU's peak arithmetic rate, measured: what a training step's FLOP/s is a fraction of
/// (MFU, model FLOPs utilisation). Each measurement keeps independent chains of multiply-adds in
/// registers, never touching memory, so nothing but the arithmetic units limits it:
///
///   f32 FMA     acc = acc * a + b on every lane of the widest vectors the build uses:
///               2 flops per lane per instruction (AVX-512: 16 lanes);
///   f64 FMA     the same on doubles (8 lanes with AVX-512);
///   bf16 dot    acc += a0 * b0 + a1 * b1 on every f32 lane, from pairs of bf16 values
///               (AVX-512 BF16's vdpbf16ps): 4 flops per lane per instruction;
///   AMX dot     a 16 x 16 f32 tile += a 16 x 32 bf16 tile times a 32 x 16 one (tdpbf16ps):
///               16,384 flops per instruction.
///
/// Enough chains run side by side to hide each instruction's latency. The programs' RESULT
/// lines divide their achieved FLOP/s by `core_peak_flops` times their threads;
/// tests/bench/peak_flops prints every kernel's rate on one thread and on all.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace lockstep::cpu {

/// The kernels that measure a peak.
enum class PeakKernel {
  f32_fma,  ///< f32 fused multiply-adds.
  f64_fma,  ///< f64 fused multiply-adds.
  bf16_dot, ///< AVX-512 BF16 `vdpbf16ps`.
  amx_dot   ///< AMX `tdpbf16ps`.
};

/// Whether this CPU (and this build) runs `kernel`.
bool peak_kernel_available(PeakKernel kernel);

/// The flops of one iteration of `kernel`.
double peak_kernel_flops(PeakKernel kernel);

/// Runs `iterations` iterations of `kernel` on the calling thread and returns a value computed
/// from its sums (for the caller to consume, so that the compiler keeps the work). `kernel`
/// must be available.
float run_peak_kernel(PeakKernel kernel, int64_t iterations);

/// `kernel`'s rate on the calling thread in flops per second: the best of three runs of at
/// least `seconds` each (other programs on the machine only ever slow a run down).
double peak_kernel_rate(PeakKernel kernel, double seconds);

/// The kernel that the matrix products of `dtype` run on this CPU: f32 FMAs for f32 and for f16
/// (which is widened to f32), f64 FMAs for f64, and for bf16 the path of `gemm_bf16` (AMX,
/// vdpbf16ps, or f32 FMAs for the fallback).
PeakKernel peak_kernel_for(DType dtype);

/// The peak rate of one core, in flops per second, for the matrix products of `dtype`:
/// `peak_kernel_rate(peak_kernel_for(dtype), 0.02)`, measured once per kernel (about 0.1 s) and
/// remembered. Called from one thread at a time (a program's main thread).
double core_peak_flops(DType dtype);

}  // namespace lockstep::cpu
