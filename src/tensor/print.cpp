// Tensor::str(): PyTorch's repr, closely enough that a reader recognises it at once.
//   tensor([[ 1.0000, -2.5000],
//           [ 3.0000,  4.0000]], requires_grad=True)
// Floats that are all whole numbers print as "1.", large or tiny magnitudes switch to
// scientific notation, and tensors over 1000 elements show only their first and last 3
// entries per dimension, joined by "...".
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tensor/autograd/node.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  bool integer_dtype = false;
  bool boolean = false;
  bool whole = true;   // every float is a whole number: print "2."
  bool sci = false;    // scientific notation
  int width = 1;

  std::string format(double v) const {
    char buffer[64];
    if (boolean) std::snprintf(buffer, sizeof buffer, v != 0.0 ? "True" : "False");
    else if (integer_dtype) std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(v));
    else if (std::isnan(v)) std::snprintf(buffer, sizeof buffer, "nan");
    else if (std::isinf(v)) std::snprintf(buffer, sizeof buffer, v > 0 ? "inf" : "-inf");
    else if (sci) std::snprintf(buffer, sizeof buffer, "%.4e", v);
    else if (whole) std::snprintf(buffer, sizeof buffer, "%.0f.", v);
    else std::snprintf(buffer, sizeof buffer, "%.4f", v);
    return buffer;
  }
};

// Indices printed along a dimension of `size`: all, or the edges when summarising.
std::vector<int64_t> shown(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // marks the "..."
    for (int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const std::vector<double>& values, const Shape& shape, const Shape& strides, int64_t d, int64_t base,
             bool summarize, std::vector<double>& out) {
  if (d == static_cast<int64_t>(shape.size())) {
    out.push_back(values[base]);
    return;
  }
  for (int64_t i : shown(shape[d], summarize)) {
    if (i >= 0) collect(values, shape, strides, d + 1, base + i * strides[d], summarize, out);
  }
}

void render(const std::vector<double>& values, const Shape& shape, const Shape& strides, int64_t d, int64_t base,
            bool summarize, const Formatter& f, int indent, std::string& out) {
  if (d == static_cast<int64_t>(shape.size())) {
    std::string s = f.format(values[base]);
    out += std::string(std::max<int>(0, f.width - static_cast<int>(s.size())), ' ') + s;
    return;
  }
  out += "[";
  bool first = true;
  const bool last_dim = d + 1 == static_cast<int64_t>(shape.size());
  // Rows of a matrix go on new lines, aligned under the first bracket; blank lines separate
  // higher-dimensional blocks, as in PyTorch.
  const std::string separator =
      last_dim ? ", " : "," + std::string(static_cast<size_t>(shape.size() - d - 1), '\n') + std::string(indent + d + 1, ' ');
  for (int64_t i : shown(shape[d], summarize)) {
    if (!first) out += separator;
    first = false;
    if (i < 0) {
      out += "...";
      continue;
    }
    render(values, shape, strides, d + 1, base + i * strides[d], summarize, f, indent, out);
  }
  out += "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const Tensor host = detach().to(Device::cpu()).contiguous();
  const std::vector<double> values = host.to_vector<double>();
  const bool summarize = numel() > kSummarizeThreshold;

  // Choose one format for all shown elements, from their magnitudes.
  Formatter f;
  f.integer_dtype = !is_floating(dtype());
  f.boolean = dtype() == DType::boolean;
  std::vector<double> visible;
  collect(values, shape(), host.strides(), 0, 0, summarize, visible);
  double max_abs = 0.0, min_abs = INFINITY;
  for (double v : visible) {
    if (!std::isfinite(v)) continue;
    if (v != std::floor(v)) f.whole = false;
    max_abs = std::max(max_abs, std::fabs(v));
    if (v != 0.0) min_abs = std::min(min_abs, std::fabs(v));
  }
  if (!f.integer_dtype && min_abs != INFINITY) {
    f.sci = max_abs / min_abs > 1000.0 || max_abs > 1e8 || (!f.whole && min_abs < 1e-4);
  }
  for (double v : visible) f.width = std::max(f.width, static_cast<int>(f.format(v).size()));

  const std::string prefix = "tensor(";
  std::string out = prefix;
  if (dim() == 0) {
    out += f.format(values[0]);
  } else if (numel() == 0) {
    out += "[]";
  } else {
    render(values, shape(), host.strides(), 0, 0, summarize, f, static_cast<int>(prefix.size()), out);
  }
  // Like PyTorch: say the device and dtype when they are not the defaults.
  if (!device().is_cpu()) out += ", device='" + device().str() + "'";
  if (numel() == 0 && dim() > 1) out += ", size=(" + shape_str(shape()).substr(1, shape_str(shape()).size() - 2) + ")";
  if (dtype() != DType::f32 && dtype() != DType::i64 && dtype() != DType::boolean) out += ", dtype=" + dtype_torch_name(dtype());
  if (grad_fn()) out += ", grad_fn=<" + grad_fn()->name() + ">";
  else if (requires_grad()) out += ", requires_grad=True";
  return out + ")";
}

}  // namespace lockstep
