/// \file
/// Datasets (torch.utils.data.Dataset): a numbered collection of samples that hands out a
/// whole batch at a time, and TensorDataset, the in-memory one behind every dataset of the
/// book. Also the pixel conversion shared by the image datasets (ToTensor + Normalize).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// A batch of samples: what a DataLoader yields each step.
struct Batch {
  Tensor inputs;   ///< The samples, stacked: (B, ...), f32 for the book's datasets.
  Tensor targets;  ///< Their class labels: (B), i64.
};

/// A collection of `size()` samples numbered 0..size()-1 (a map-style torch Dataset). It
/// returns a whole batch at once rather than one sample, so that a batch is one gather instead
/// of B small tensors stacked. get_batch is const and may run on the DataLoader's background
/// thread: implementations must be safe to call from another thread.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of samples (len(dataset)).
  virtual int64_t size() const = 0;
  /// The samples at `indices`, in that order: inputs (B, ...) and targets (B).
  virtual Batch get_batch(const std::vector<int64_t>& indices) const = 0;
};

/// A dataset held in memory as two tensors (torch.utils.data.TensorDataset): sample i is row i
/// of `inputs` with label `targets[i]`.
class TensorDataset : public Dataset {
 public:
  /// Wraps `inputs` (N, ...) and `targets` (N, i64) on the CPU (made contiguous if they are
  /// not). `classes` names the labels (torchvision's dataset.classes); may be empty.
  TensorDataset(Tensor inputs, Tensor targets, std::vector<std::string> classes = {});

  /// N.
  int64_t size() const override { return targets_.size(0); }
  /// Gathers rows `indices` of inputs and targets into new tensors (one memcpy per row).
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  /// All samples: (N, ...).
  const Tensor& inputs() const { return inputs_; }
  /// All labels: (N), i64.
  const Tensor& targets() const { return targets_; }
  /// The name of each class, indexed by label (empty if none were given).
  const std::vector<std::string>& classes() const { return classes_; }
  /// Number of classes: classes().size() if names were given, otherwise the largest label + 1.
  int64_t num_classes() const { return num_classes_; }

 private:
  Tensor inputs_;
  Tensor targets_;
  std::vector<std::string> classes_;
  int64_t num_classes_ = 0;
};

/// Converts image bytes to network inputs as torchvision's `ToTensor()` then
/// `Normalize(mean, std)` do: pixels u8 (N, C, H, W) become f32 (N, C, H, W) with
/// value = (pixel / 255 - mean[c]) / std[c], computed in f32 exactly as PyTorch does.
/// Empty `mean` and `std` mean ToTensor only: values in [0, 1].
Tensor pixels_to_float(const Tensor& pixels, const std::vector<float>& mean = {}, const std::vector<float>& std = {});

}  // namespace lockstep
