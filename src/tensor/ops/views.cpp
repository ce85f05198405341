// Tensor's view methods (declared in tensor/tensor.h): each writes new shape/strides/offset over
// the same storage, and records how to route the gradient back to the original layout.
#include <algorithm>
#include <numeric>

#include "tensor/autograd/node.h"
#include "tensor/copy.h"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/tensor_impl.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

namespace {

// A new tensor over t's storage with the given layout (no autograd).
Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = t.dtype();
  return detail::TensorInternals::wrap(std::move(impl));
}

// Replaces one -1 in `shape` by whatever makes the element count equal `numel`.
Shape infer_shape(const char* op, Shape shape, int64_t numel, const Shape& from) {
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LOCKSTEP_CHECK(unknown < 0, op, ": only one dimension can be -1, got ", shape_str(shape));
      unknown = static_cast<int64_t>(i);
    } else {
      LOCKSTEP_CHECK(shape[i] >= 0, op, ": invalid size in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (unknown >= 0) {
    LOCKSTEP_CHECK(known > 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ",
                   numel);
    shape[unknown] = numel / known;
  }
  LOCKSTEP_CHECK(shape_numel(shape) == numel, op, ": shape ", shape_str(shape), " is invalid for input of shape ",
                 shape_str(from), " (", numel, " elements)");
  return shape;
}

// Strides that give `t`'s elements the new shape without moving data, if possible: each run
// of new dimensions must map onto a run of old dimensions that are contiguous with each other.
bool compute_view_strides(const Tensor& t, const Shape& shape, Shape& strides) {
  strides.assign(shape.size(), 1);
  // Empty and 0-d tensors have no layout to respect.
  if (t.numel() == 0 || t.dim() == 0) {
    strides = contiguous_strides(shape);
    return true;
  }
  int64_t new_d = static_cast<int64_t>(shape.size()) - 1;
  // Walk old dimensions from the innermost, grouping those that are mutually contiguous.
  int64_t chunk_base_stride = t.strides().back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    tensor_numel *= t.shape()[d];
    const bool chunk_ends = d == 0 || (t.shape()[d - 1] != 1 && t.strides()[d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_ends) {
      // Lay the new dimensions over this chunk, innermost first.
      while (new_d >= 0 && (view_numel < tensor_numel || shape[new_d] == 1)) {
        strides[new_d] = view_numel * chunk_base_stride;
        view_numel *= shape[new_d];
        --new_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = t.strides()[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return new_d == -1;
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  const Shape shape = infer_shape("view", requested, numel(), this->shape());
  Shape new_strides;
  LOCKSTEP_CHECK(compute_view_strides(*this, shape, new_strides), "view: shape ", shape_str(shape),
                 " is not compatible with the input's strides (a transposed or sliced tensor); use reshape(), or call "
                 "contiguous() first");
  Tensor out = make_view(*this, shape, new_strides, offset());
  return record(out, "ViewBackward", {*this}, [in_shape = this->shape()](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
}

Tensor Tensor::reshape(const Shape& requested) const {
  const Shape shape = infer_shape("reshape", requested, numel(), this->shape());
  Shape new_strides;
  if (compute_view_strides(*this, shape, new_strides)) return view(shape);
  return contiguous().view(shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t start = wrap_dim(start_dim, dim(), "flatten");
  const int64_t end = wrap_dim(end_dim, dim(), "flatten");
  LOCKSTEP_CHECK(start <= end, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(this->shape().begin(), this->shape().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= this->shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), this->shape().begin() + end + 1, this->shape().end());
  return reshape(shape);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t nd = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shape = this->shape();
  shape.insert(shape.begin() + nd, 1);
  return view(shape);
}

Tensor Tensor::squeeze(int64_t d) const {
  const int64_t nd = wrap_dim(d, dim(), "squeeze");
  // As in PyTorch, squeezing a dimension that is not of size 1 (or a 0-d tensor) changes nothing.
  if (dim() == 0 || shape()[nd] != 1) return view(this->shape());
  Shape shape = this->shape();
  shape.erase(shape.begin() + nd);
  return view(shape);
}

Tensor Tensor::permute(const Shape& dims) const {
  LOCKSTEP_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(), " dimensions for a ", dim(),
                 "-D tensor");
  Shape shape(dims.size()), new_strides(dims.size()), inverse(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    LOCKSTEP_CHECK(!used[d], "permute: dimension ", dims[i], " repeats in ", shape_str(dims));
    used[d] = true;
    shape[i] = this->shape()[d];
    new_strides[i] = strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  Tensor out = make_view(*this, shape, new_strides, offset());
  return record(out, "PermuteBackward", {*this}, [inverse](const Tensor& g) {
    return std::vector<Tensor>{g.permute(inverse)};
  });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  // A 0-d tensor is its own transpose (PyTorch accepts dimensions 0 and -1 for it).
  if (dim() == 0) {
    wrap_dim(d0, 0, "transpose");
    wrap_dim(d1, 0, "transpose");
    return *this;
  }
  Shape dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::t() const {
  LOCKSTEP_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", shape_str(shape()), " (use transpose(d0, d1))");
  return transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  LOCKSTEP_CHECK(dim() > 0, "slice: a 0-d tensor has no dimensions to slice");
  const int64_t nd = wrap_dim(d, dim(), "slice");
  LOCKSTEP_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t size = shape()[nd];
  // Python's slicing rules: negative indices count from the end, out-of-range ones clamp.
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t lo = clamp(start), hi = std::max(clamp(end), clamp(start));
  Shape shape = this->shape(), new_strides = strides();
  shape[nd] = (hi - lo + step - 1) / step;
  new_strides[nd] *= step;
  Tensor out = make_view(*this, shape, new_strides, offset() + lo * strides()[nd]);
  // The gradient lands in the sliced positions of a zero tensor of the input's shape.
  return record(out, "SliceBackward", {*this}, [in_shape = this->shape(), nd, lo, hi, step](const Tensor& g) {
    Tensor grad = zeros(in_shape, g.options());
    grad.slice(nd, lo, hi, step).copy_(g);
    return std::vector<Tensor>{grad};
  });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  LOCKSTEP_CHECK(dim() > 0, "select: a 0-d tensor has no dimensions to index");
  const int64_t nd = wrap_dim(d, dim(), "select");
  const int64_t size = shape()[nd];
  LOCKSTEP_CHECK(index >= -size && index < size, "select: index ", index, " is out of range for dimension ", d,
                 " of size ", size);
  const int64_t i = index < 0 ? index + size : index;
  return slice(nd, i, i + 1).squeeze(nd);
}

Tensor Tensor::expand(const Shape& requested) const {
  LOCKSTEP_CHECK(static_cast<int64_t>(requested.size()) >= dim(), "expand: the target ", shape_str(requested),
                 " has fewer dimensions than the tensor's ", shape_str(this->shape()));
  // -1 keeps the size of the matching existing dimension (PyTorch's convention).
  Shape shape = requested;
  const int64_t lead = static_cast<int64_t>(shape.size()) - dim();
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (shape[i] != -1) continue;
    LOCKSTEP_CHECK(i >= lead, "expand: -1 is not allowed for the new leading dimension ", i, " in ", shape_str(requested));
    shape[i] = this->shape()[i - lead];
  }
  Tensor out = make_view(*this, shape, broadcast_strides(*this, shape, "expand"), offset());
  return record(out, "ExpandBackward", {*this}, [in_shape = this->shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, in_shape)};
  });
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), TensorOptions().dtype(dtype()).device(device()));
  copy_strided(*this, out);
  return record(out, "CloneBackward", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), TensorOptions().dtype(target).device(device()));
  copy_strided(*this, out);
  // Only floating results carry gradients; they flow back converted to the input's dtype.
  if (!is_floating(target)) return out;
  return record(out, "ToCopyBackward", {*this}, [source = dtype()](const Tensor& g) {
    return std::vector<Tensor>{g.to(source)};
  });
}

Tensor Tensor::to(Device target, bool non_blocking) const {
  if (target == device()) return *this;
  // Allocating on the target reports why a device cannot be used (no CUDA build, no GPU).
  Tensor out = empty(shape(), TensorOptions().dtype(dtype()).device(target));
  // Bytes cross between devices as one dense block, so a strided view is first made
  // contiguous where it lives.
  cuda::copy_between_devices(detach().contiguous(), out, non_blocking);
  // The gradient of a copy is the gradient itself, copied back to where the input lives.
  return record(out, "ToCopyBackward", {*this}, [source = device()](const Tensor& g) {
    return std::vector<Tensor>{g.to(source)};
  });
}

Tensor Tensor::pin_memory() const {
  LOCKSTEP_CHECK(device().is_cpu(), "pin_memory: only CPU tensors can be pinned, this one is on ", device());
  if (is_pinned()) return *this;
  Tensor out = empty(shape(), TensorOptions().dtype(dtype()).pinned_memory(true));
  copy_strided(*this, out);
  return record(out, "PinMemoryBackward", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

bool Tensor::is_pinned() const { return storage()->pinned(); }

}  // namespace lockstep
