/// \file
/// GradScaler: dynamic loss scaling for mixed-precision training (torch.amp.GradScaler).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/device.h"
#include "nn/state_dict.h"
#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace lockstep {

/// GradScaler's settings, set by chaining: `GradScalerOptions().init_scale(1024).growth_interval(100)`.
/// The defaults are PyTorch's.
class GradScalerOptions {
 public:
  /// Sets the scale to start from (default 65536 = 2^16).
  GradScalerOptions& init_scale(double value) { init_scale_ = value; return *this; }
  /// Sets the factor the scale grows by after growth_interval clean steps (default 2).
  GradScalerOptions& growth_factor(double value) { growth_factor_ = value; return *this; }
  /// Sets the factor the scale shrinks by after a step with an inf or NaN gradient (default 0.5).
  GradScalerOptions& backoff_factor(double value) { backoff_factor_ = value; return *this; }
  /// Sets how many clean steps in a row make the scale grow (default 2000).
  GradScalerOptions& growth_interval(int64_t value) { growth_interval_ = value; return *this; }
  /// Turns scaling on or off (default on); off, the scaler passes everything through.
  GradScalerOptions& enabled(bool value) { enabled_ = value; return *this; }

  /// The scale to start from.
  double init_scale() const { return init_scale_; }
  /// The growth factor.
  double growth_factor() const { return growth_factor_; }
  /// The backoff factor.
  double backoff_factor() const { return backoff_factor_; }
  /// The growth interval, in steps.
  int64_t growth_interval() const { return growth_interval_; }
  /// Whether scaling is on.
  bool enabled() const { return enabled_; }

 private:
  double init_scale_ = 65536.0;
  double growth_factor_ = 2.0;
  double backoff_factor_ = 0.5;
  int64_t growth_interval_ = 2000;
  bool enabled_ = true;
};

/// Dynamic loss scaling, as torch.amp.GradScaler. In 16-bit floats small gradients round to
/// zero (f16's smallest normal number is about 6e-5); multiplying the loss by a large scale
/// multiplies every gradient by it too, lifting them into range, and unscaling before the
/// optimiser step gives back the true gradients. One iteration:
///
///     optimizer.zero_grad();
///     scaler.scale(loss).backward();   // gradients are scale * the true ones
///     scaler.unscale_(optimizer);      // optional: only to read or clip the true gradients
///     scaler.step(optimizer);          // unscales if needed; skips the step on inf or NaN
///     scaler.update();                 // adjusts the scale for the next iteration
///
/// The scale adapts: a gradient that overflowed (inf or NaN) means the scale is too large, so
/// that step is skipped and the scale multiplied by backoff_factor; after growth_interval clean
/// steps in a row it is multiplied by growth_factor, probing for the largest scale that does not
/// overflow. Like PyTorch's, the scale is a 32-bit float, so growth and backoff round as there,
/// and growth stops where the grown scale would be inf.
///
/// Under DistributedDataParallel the gradients are all-reduced during backward(), before they
/// are unscaled, so an inf on one rank reaches every rank's gradients: all ranks find it, skip
/// the same step and keep the same scale. The scaler needs no communication of its own.
///
/// The scaler remembers, per optimiser object (PyTorch's `_per_optimizer_states`), whether its
/// gradients were unscaled and the step taken since the last update(); update() forgets all of
/// it. It holds the optimiser's address only until then, never the optimiser.
class GradScaler {
 public:
  /// A scaler with `options` (PyTorch's defaults unless set).
  explicit GradScaler(const GradScalerOptions& options = GradScalerOptions());

  /// `loss * scale`, recorded by autograd so that backward() gives scaled gradients; `loss`
  /// itself when the scaler is disabled.
  Tensor scale(const Tensor& loss) const;

  /// Divides the gradients of `optimizer`'s parameters by the scale, in place, and records
  /// whether any of them holds an inf or NaN, in one pass over each gradient (the fused
  /// kernel, tensor/ops/dispatch/amp_kernels.h). Call it between backward() and step() to see or
  /// clip the true gradients; at most once per optimiser between two update()s. Gradients
  /// must be f32 or f64. Does nothing when the scaler is disabled.
  void unscale_(Optimizer& optimizer);

  /// Unscales the gradients if unscale_() was not called, then runs `optimizer.step()` unless a
  /// gradient held an inf or NaN. Returns whether the optimiser stepped. (PyTorch returns
  /// what optimizer.step() returns, or None when it skipped; Lockstep's step() returns nothing,
  /// and "did it step?" is what a caller asks, e.g. to keep a learning-rate schedule in time.)
  /// Once per optimiser between two update()s. Disabled, it just steps and returns true.
  bool step(Optimizer& optimizer);

  /// Ends the iteration: the scale is multiplied by backoff_factor if any optimiser stepped (or
  /// unscaled) since the last update() found an inf or NaN, which also restarts the count of
  /// clean steps; otherwise that count goes up, and on reaching growth_interval the scale is
  /// multiplied by growth_factor (if the result is finite) and the count restarts. Needs a
  /// step() or unscale_() since the last update(). Does nothing when disabled.
  void update();
  /// Ends the iteration by setting the scale to `new_scale` instead (PyTorch's
  /// `update(new_scale)`); the count of clean steps stays as it is.
  void update(double new_scale);

  /// The current scale; 1 when the scaler is disabled.
  double get_scale() const;
  /// Whether the scaler scales (GradScalerOptions::enabled).
  bool is_enabled() const { return enabled_; }
  /// The factor the scale grows by.
  double get_growth_factor() const { return growth_factor_; }
  /// The factor the scale shrinks by.
  double get_backoff_factor() const { return backoff_factor_; }
  /// How many clean steps in a row make the scale grow.
  int64_t get_growth_interval() const { return growth_interval_; }

  /// The scaler's state under PyTorch's keys: "scale" (f32), "growth_factor",
  /// "backoff_factor" (f64), "growth_interval" and "_growth_tracker" (the count of clean
  /// steps, i64), each a one-element CPU tensor, so that a checkpoint holds it beside the
  /// model's (io/safetensors.h). Empty when the scaler is disabled, as in PyTorch.
  StateDict state_dict() const;
  /// Restores what state_dict() returned (every key must be there; their order does not
  /// matter). Ignored when the scaler is disabled, as in PyTorch.
  void load_state_dict(const StateDict& state);

 private:
  // Where an optimiser is in the iteration (PyTorch's OptState).
  enum class Stage { ready, unscaled, stepped };
  // What the scaler knows about one optimiser since the last update().
  struct OptimizerState {
    Stage stage = Stage::ready;
    // One f32 flag per device its gradients live on, set to 1 by the kernel on an inf or NaN
    // and read only when the answer is needed (step, update), so unscale_ does not wait for a GPU.
    std::vector<std::pair<Device, Tensor>> found_inf_per_device;
  };

  // Whether any flag of `state` is set (waits for the GPUs that set them).
  static bool found_inf(const OptimizerState& state);
  // Throws unless the scale can be inverted: finite and positive. `caller` starts the message.
  void check_scale_invertible(const char* caller) const;

  float scale_;            // a 32-bit float, as PyTorch's _scale tensor
  int64_t growth_tracker_ = 0;  // clean steps in a row since the scale last changed
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  bool enabled_;
  std::map<const Optimizer*, OptimizerState> per_optimizer_states_;
};

}  // namespace lockstep
