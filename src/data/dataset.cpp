#include "data/dataset.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace lockstep {

TensorDataset::TensorDataset(Tensor inputs, Tensor targets, std::vector<std::string> classes)
    : classes_(std::move(classes)) {
  LOCKSTEP_CHECK(inputs.defined() && targets.defined(), "TensorDataset: expected defined inputs and targets");
  LOCKSTEP_CHECK(inputs.device().is_cpu() && targets.device().is_cpu(),
                 "TensorDataset: expected inputs and targets on the cpu, got ", inputs.device(), " and ",
                 targets.device(), " (move batches to the device after loading them)");
  LOCKSTEP_CHECK(inputs.dim() >= 1, "TensorDataset: expected inputs with a batch dimension (N, ...), got a scalar");
  LOCKSTEP_CHECK(targets.dtype() == DType::i64 && targets.dim() == 1,
                 "TensorDataset: expected targets of shape (N) and dtype i64, got ", shape_str(targets.shape()),
                 " and ", targets.dtype());
  LOCKSTEP_CHECK(inputs.size(0) == targets.size(0), "TensorDataset: expected as many targets as inputs, got ",
                 inputs.size(0), " inputs and ", targets.size(0), " targets");
  // get_batch copies whole rows with memcpy, so both tensors must be dense.
  inputs_ = inputs.contiguous().detach();
  targets_ = targets.contiguous().detach();

  const int64_t* labels = targets_.data_ptr<int64_t>();
  const int64_t n = targets_.numel();
  const int64_t largest = n == 0 ? -1 : *std::max_element(labels, labels + n);
  const int64_t smallest = n == 0 ? 0 : *std::min_element(labels, labels + n);
  LOCKSTEP_CHECK(smallest >= 0, "TensorDataset: expected class labels >= 0, got ", smallest);
  num_classes_ = classes_.empty() ? largest + 1 : static_cast<int64_t>(classes_.size());
  LOCKSTEP_CHECK(largest < num_classes_, "TensorDataset: label ", largest, " is out of range for ", num_classes_,
                 " class names");
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  const int64_t batch = static_cast<int64_t>(indices.size());
  Shape shape = inputs_.shape();
  shape[0] = batch;
  Batch out{empty(shape, TensorOptions().dtype(inputs_.dtype())), empty({batch}, TensorOptions().dtype(DType::i64))};

  // One sample is one contiguous row of `row_bytes` in inputs (and one int64 in targets).
  const Shape row_shape(shape.begin() + 1, shape.end());
  const size_t row_bytes = static_cast<size_t>(shape_numel(row_shape)) * element_size(inputs_.dtype());
  const auto* source = static_cast<const char*>(inputs_.data());
  auto* destination = static_cast<char*>(out.inputs.data());
  const int64_t* labels = targets_.data_ptr<int64_t>();
  int64_t* out_labels = out.targets.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t i = indices[b];
    LOCKSTEP_CHECK(i >= 0 && i < n, "TensorDataset::get_batch: index ", i, " is out of range for a dataset of ", n,
                   " samples");
    std::memcpy(destination + b * row_bytes, source + i * row_bytes, row_bytes);
    out_labels[b] = labels[i];
  }
  return out;
}

Tensor pixels_to_float(const Tensor& pixels, const std::vector<float>& mean, const std::vector<float>& std) {
  LOCKSTEP_CHECK(pixels.dtype() == DType::u8 && pixels.dim() == 4,
                 "pixels_to_float: expected u8 pixels of shape (N, C, H, W), got ", shape_str(pixels.shape()), " and ",
                 pixels.dtype());
  const int64_t channels = pixels.size(1);
  const bool normalize = !mean.empty() || !std.empty();
  LOCKSTEP_CHECK(!normalize || (int64_t(mean.size()) == channels && int64_t(std.size()) == channels),
                 "pixels_to_float: expected one mean and one std per channel (", channels, "), got ", mean.size(),
                 " means and ", std.size(), " stds");

  // A pixel has only 256 values: compute each channel's 256 outputs once, as torchvision does
  // them in f32 (x.div(255), then x.sub_(mean).div_(std)), and look them up.
  std::vector<float> table(static_cast<size_t>(channels) * 256);
  for (int64_t c = 0; c < channels; ++c) {
    for (int v = 0; v < 256; ++v) {
      float x = static_cast<float>(v) / 255.0f;
      if (normalize) x = (x - mean[c]) / std[c];
      table[c * 256 + v] = x;
    }
  }

  const Tensor source = pixels.contiguous();
  Tensor out = empty(pixels.shape());  // out: (N, C, H, W) f32
  const uint8_t* in = source.data_ptr<uint8_t>();
  float* values = out.data_ptr<float>();
  const int64_t plane = pixels.size(2) * pixels.size(3);
  const int64_t planes = pixels.size(0) * channels;
#pragma omp parallel for
  for (int64_t p = 0; p < planes; ++p) {
    const float* lookup = table.data() + (p % channels) * 256;
    for (int64_t k = 0; k < plane; ++k) values[p * plane + k] = lookup[in[p * plane + k]];
  }
  return out;
}

}  // namespace lockstep
