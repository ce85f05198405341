/// \file
/// BatchNorm2d (torch.nn.BatchNorm2d): per-channel batch normalisation of images, with running
/// statistics for evaluation.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace lockstep {

/// Batch normalisation over (N, H, W) for each of C channels, like torch.nn.BatchNorm2d(C, eps,
/// momentum) with affine and track_running_stats on. Input and output (N, C, H, W).
///
/// In training mode every forward normalises with the batch's own mean and variance, updates
/// running_mean and running_var as exponential moving averages (see tensor/ops/batch_norm.h) and
/// adds one to num_batches_tracked. In evaluation mode it normalises with the running statistics
/// and changes nothing, so one image gives the same answer whatever batch it comes in.
class BatchNorm2d : public Module {
 public:
  /// C channels; weight ones, bias zeros, running_mean zeros, running_var ones.
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);

  /// x: (N, C, H, W) -> (N, C, H, W).
  Tensor forward(const Tensor& input) override;
  /// A new BatchNorm2d with the same settings (see Module::clone_structure).
  std::shared_ptr<Module> clone_structure() const override;
  /// "16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True".
  std::string extra_repr() const override;

  int64_t num_features;        ///< C.
  double eps;                  ///< Added to the variance before the square root.
  double momentum;             ///< Weight of the newest batch in the running averages.
  Tensor weight;               ///< Parameter (C): the scale (gamma).
  Tensor bias;                 ///< Parameter (C): the shift (beta).
  Tensor running_mean;         ///< Buffer (C): moving average of the batch means.
  Tensor running_var;          ///< Buffer (C): moving average of the unbiased batch variances.
  Tensor num_batches_tracked;  ///< Buffer, i64 scalar: training batches seen.
};

}  // namespace lockstep
