/// \file
/// Whether operations are being recorded for backward (torch.is_grad_enabled / no_grad).
#pragma once

namespace lockstep {

/// Whether ops on tensors that require grad record themselves in the graph (per thread).
bool grad_mode_enabled();
/// Turns recording on or off for the calling thread.
void set_grad_mode(bool enabled);

/// Turns recording off for its lifetime (torch.no_grad()): use it for evaluation and for
/// optimiser updates. Restores the previous mode when destroyed.
///
/// \see @ref chapter1 "Chapter 1: Tensors, autograd and devices", which introduces it.
class NoGradGuard {
 public:
  /// Disables grad mode.
  NoGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode(false); }
  /// Restores the previous grad mode.
  ~NoGradGuard() { set_grad_mode(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;             ///< Not copyable: it guards a scope.
  NoGradGuard& operator=(const NoGradGuard&) = delete;  ///< Not copyable: it guards a scope.

 private:
  bool previous_;
};

}  // namespace lockstep
