/// \file
/// MFU (model FLOPs utilisation) for the chapters: the flops a stretch of training steps ran,
/// counted by the library (core/flop_count.h), per sample, and the FLOP/s they achieved as a
/// fraction of the hardware's peak for the dtype of their matrix products. Every chapter's
/// RESULT line carries both, as `flops_per_sample=` and `mfu=`.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace lockstep {

/// The peak rate the chapters divide by, in flops per second, for one rank that computes on
/// `device` with matrix products in `dtype` (f32, or the autocast dtype): on the CPU, one core's
/// peak for the kernel those products run (cpu::core_peak_flops: f32 FMAs, bf16 dot products or
/// AMX tiles) times `threads`; on a GPU, the rate of a 4096 x 4096 x 4096 matmul in `dtype`
/// (cuBLAS), measured once per device and dtype. Measured before training: a GPU's matmuls count
/// as flops too.
double rank_peak_flops(Device device, DType dtype, int threads);

/// Counts the flops of the training steps run between start() and stop(), over several
/// stretches (one per epoch): evaluation runs outside them.
class TrainingFlops {
 public:
  /// Marks the start of a stretch of training steps.
  void start();
  /// Ends the stretch, adding its flops to the total and returning them.
  int64_t stop();
  /// The flops of every stretch so far.
  int64_t total() const { return total_; }

 private:
  int64_t started_at_ = 0;
  int64_t total_ = 0;
};

/// A run's flops per sample and its MFU.
struct ModelFlops {
  int64_t per_sample = 0;  ///< flops per training sample (forward and backward; counted on this rank), rounded
  double mfu = 0.0;         ///< achieved flops per second over the peak, a fraction
};

/// `flops` over `samples` (this rank's), and `per_sample * samples_per_s` (every rank's samples per
/// second) over `peak_flops` (every rank's peak together). Zero where nothing was counted.
ModelFlops model_flops(int64_t flops, int64_t samples, double samples_per_s, double peak_flops);

}  // namespace lockstep
