/// \file
/// Autocast (torch.autocast): inside a region, the ops that gain most from a 16-bit format run
/// in it, and the ops that need f32's range or precision run in f32, whatever dtype their inputs
/// have. The model's parameters stay f32 (the master weights); an op casts them as it uses them,
/// and the cast is recorded by autograd, so their gradients come back in f32.
///
/// The policy, PyTorch's (chapter 5 has the table and the reasons):
/// - lower precision (the region's dtype, bf16 or f16): matmul, linear, conv2d. They do
///   most of the arithmetic, and their sums accumulate in f32 anyway.
/// - f32: softmax, log_softmax, cross_entropy, nll_loss, sum, mean, exp, log, and batch norm's
///   statistics. They sum many terms or span a wide range, where 16 bits lose too much.
/// - the input's dtype: everything else (relu, max_pool2d, dropout, views, ...); a binary op of
///   two floating dtypes promotes to the wider one (bf16 + f32 gives f32).
///
/// A parameter (a leaf that requires grad) is cast once per region, not once per use: the
/// casts are cached until the outermost region ends (the cast cache). A cached cast is made
/// again if the parameter was changed in place since.
#pragma once

#include <cstddef>

#include "core/device.h"
#include "core/dtype.h"

namespace lockstep {

class Tensor;

/// Whether autocast is on for ops on `device_type` in the calling thread
/// (torch.is_autocast_enabled).
bool is_autocast_enabled(DeviceType device_type);

/// The dtype autocast casts to on `device_type` (torch.get_autocast_dtype): the dtype of the
/// innermost region, or the default where none set one: bf16 on the CPU, f16 on CUDA.
DType get_autocast_dtype(DeviceType device_type);

/// How many casts the cast cache of the calling thread holds: one per parameter used in the
/// current region, 0 outside every region.
size_t autocast_cache_size();

/// An autocast region for its lifetime (`with torch.autocast(device_type, dtype, enabled):`).
/// Regions nest: the inner one's settings hold until it ends, then the outer one's return, so
/// `AutocastGuard(DeviceType::CPU, DType::bf16, false)` inside a region runs a part of it in
/// the inputs' own dtypes. Per thread, like PyTorch's. The cast cache is emptied when the
/// outermost region ends.
///
/// \see @ref chapter5 "Chapter 5: Mixed precision".
class AutocastGuard {
 public:
  /// Opens a region for ops on `device_type`, casting to `dtype` (bf16 or f16; anything else
  /// throws) when `enabled`.
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true);
  /// Restores the settings the region replaced.
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;             ///< Not copyable: it guards a scope.
  AutocastGuard& operator=(const AutocastGuard&) = delete;  ///< Not copyable: it guards a scope.

 private:
  DeviceType device_type_;
  bool previous_enabled_;
  DType previous_dtype_;
};

namespace autocast {

/// For ops of the lower-precision list: `t` cast to the autocast dtype when autocast is on for
/// its device and it is f32 (an f64 or integer tensor is left alone, as PyTorch does);
/// otherwise `t` itself. A parameter's cast comes from the cast cache. An undefined tensor
/// stays undefined.
Tensor to_lower_precision(const Tensor& t);

/// For ops of the f32 list: `t` cast to f32 when autocast is on for its device and it is f16
/// or bf16; otherwise `t` itself.
Tensor to_f32(const Tensor& t);

/// Turns autocast off on every device for its lifetime, without touching the cast cache: the
/// backward pass runs under it, so that gradients keep the dtypes of the forward pass.
class Suspend {
 public:
  /// Turns autocast off.
  Suspend();
  /// Turns it back on where it was.
  ~Suspend();
  Suspend(const Suspend&) = delete;             ///< Not copyable: it guards a scope.
  Suspend& operator=(const Suspend&) = delete;  ///< Not copyable: it guards a scope.

 private:
  bool cpu_;
  bool cuda_;
};

}  // namespace autocast

}  // namespace lockstep
