/// \file
/// Tensor: a view (shape, strides, offset, dtype) onto a shared Storage, plus the autograd
/// fields that let gradients flow back to it. Copying a Tensor copies the handle, not the data,
/// exactly like a torch.Tensor in Python.
///
/// Element (i0, i1, ..., in) lives at byte
///     storage.data() + (offset + i0*stride[0] + ... + in*stride[n]) * element_size(dtype)
/// so reshape/transpose/slice/expand only write new strides: they are views, no data moves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace lockstep {

class Node;
class Generator;
struct TensorImpl;
namespace detail {
struct TensorInternals;
}  // namespace detail

/// A list of sizes (a shape) or of strides, outermost dimension first.
using Shape = std::vector<int64_t>;

/// Formats a shape as PyTorch does: "[2, 3]".
std::string shape_str(const Shape& shape);
/// Number of elements of a shape (1 for the scalar shape []).
int64_t shape_numel(const Shape& shape);
/// Maps a possibly negative dimension index `d` of a `dims`-D tensor into [0, dims), as
/// PyTorch's maybe_wrap_dim: -1 is the last dimension. A 0-d tensor has one position, 0 or -1,
/// where `wrap_scalar` (most ops); without it (size(), stride()) any index of a 0-d tensor is an
/// error. Throws a sentence naming `op` (if not null) and the dimension otherwise.
int64_t wrap_dim(int64_t d, int64_t dims, const char* op = nullptr, bool wrap_scalar = true);
/// Row-major ("C-contiguous") strides for a shape: the last dimension has stride 1.
Shape contiguous_strides(const Shape& shape);
/// The bytes a contiguous tensor of non-negative `shape` and `dtype` needs, or nullopt where
/// the element size times the non-zero sizes reaches 2^63. Zeros are left out of that product
/// on purpose: an empty tensor's strides are still products of its other sizes, and every
/// byte offset computed from them must fit in int64.
std::optional<uint64_t> shape_nbytes(const Shape& shape, DType dtype);

/// Identifies a hook registered on a tensor, so it can be removed again.
using HookHandle = uint64_t;

/// A hook run after a leaf's gradient has been fully accumulated in one backward pass; it
/// receives the leaf (whose grad() is now complete). DDP hangs its gradient buckets on these.
using PostAccumulateGradHook = std::function<void(const class Tensor&)>;

/// dtype, device and requires_grad for the factories, set by chaining:
/// `zeros({2, 3}, TensorOptions().dtype(DType::f64).requires_grad(true))`.
class TensorOptions {
 public:
  /// Sets the element type (default f32, or what a factory infers from its values).
  TensorOptions& dtype(DType value) { dtype_ = value; return *this; }
  /// Sets the device (default cpu).
  TensorOptions& device(Device value) { device_ = value; return *this; }
  /// Sets whether the new tensor is a leaf that requires grad (default false).
  TensorOptions& requires_grad(bool value) { requires_grad_ = value; return *this; }
  /// Sets whether a CPU tensor is allocated in pinned host memory (default false; needs CUDA).
  TensorOptions& pinned_memory(bool value) { pinned_memory_ = value; return *this; }
  /// The element type: the one set, else f32.
  DType dtype() const { return dtype_.value_or(DType::f32); }
  /// Whether an element type was set (from_vector of integers keeps them as i64 unless one was).
  bool has_dtype() const { return dtype_.has_value(); }
  /// The device.
  Device device() const { return device_; }
  /// Whether the tensor will require grad.
  bool requires_grad() const { return requires_grad_; }
  /// Whether the memory will be pinned host memory.
  bool pinned_memory() const { return pinned_memory_; }

 private:
  std::optional<DType> dtype_;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  bool pinned_memory_ = false;
};

/// An n-dimensional array with autograd, like torch.Tensor. A default-constructed Tensor is
/// "undefined" (holds nothing), as a missing gradient is.
///
/// \see @ref chapter1 "Chapter 1: Tensors, autograd and devices", which introduces it.
class Tensor {
 public:
  /// An undefined tensor.
  Tensor() = default;

  // Metadata
  /// Whether this handle holds a tensor.
  bool defined() const { return impl_ != nullptr; }
  /// The sizes of every dimension.
  const Shape& shape() const;
  /// The step, in elements, between neighbours along each dimension.
  const Shape& strides() const;
  /// Index of the first element inside the storage, in elements.
  int64_t offset() const;
  /// Number of dimensions.
  int64_t dim() const;
  /// Size of dimension `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  /// Stride of dimension `d` (negative counts from the end).
  int64_t stride(int64_t d) const;
  /// Number of elements.
  int64_t numel() const;
  /// Bytes of its elements: numel() times the element size (PyTorch's `nbytes`).
  int64_t nbytes() const;
  /// Element type.
  DType dtype() const;
  /// Device holding the data.
  Device device() const;
  /// This tensor's dtype and device as TensorOptions, for making another tensor like it
  /// (PyTorch's `options()`): `zeros({3}, x.options())`.
  TensorOptions options() const { return TensorOptions().dtype(dtype()).device(device()); }
  /// Whether elements are laid out densely in row-major order (views may not be).
  bool is_contiguous() const;
  /// The shared memory block.
  const std::shared_ptr<Storage>& storage() const;
  /// Address of the first element (storage start plus offset). An error when the storage's
  /// memory has been freed (Storage::resize(0), as FSDP does between a unit's uses).
  void* data() const;
  /// Typed address of the first element; checks that T matches dtype().
  template <class T> T* data_ptr() const;
  /// Whether both handles refer to the same tensor object.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // Views (share storage; differentiable; defined in tensor/ops/views.cpp)
  /// Same data, new shape; needs compatible strides (use reshape otherwise). One size may be -1.
  Tensor view(const Shape& shape) const;
  /// view() when possible, otherwise a contiguous copy with the new shape.
  Tensor reshape(const Shape& shape) const;
  /// Merges dimensions start..end into one.
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Inserts a dimension of size 1 at `d`.
  Tensor unsqueeze(int64_t d) const;
  /// Removes dimension `d` if it has size 1 (otherwise returns an unchanged view, as PyTorch).
  Tensor squeeze(int64_t d) const;
  /// Swaps two dimensions.
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// Transpose of a 2-D tensor.
  Tensor t() const;
  /// Reorders dimensions: result dimension i is input dimension dims[i].
  Tensor permute(const Shape& dims) const;
  /// Elements start, start+step, ... (< end) along `d`; negative start/end count from the end.
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;
  /// Index `index` along `d`, removing that dimension.
  Tensor select(int64_t d, int64_t index) const;
  /// select(0, index), so `t[1][2].item()` reads one element.
  Tensor operator[](int64_t index) const { return select(0, index); }
  /// Broadcasts size-1 dimensions to `shape` with stride 0 (no copy); -1 keeps a size.
  Tensor expand(const Shape& shape) const;

  // Copies and conversions
  /// This tensor if already contiguous, otherwise a contiguous copy (differentiable).
  Tensor contiguous() const;
  /// A contiguous copy with its own storage (differentiable).
  Tensor clone() const;
  /// A copy converted to `dtype` (this tensor if it already has that dtype; differentiable).
  Tensor to(DType dtype) const;
  /// A copy on `device` (this tensor if it is already there; differentiable). Unlike
  /// Module::to, the original is left where it was. With `non_blocking`, a copy from pinned
  /// memory to a GPU (or from a GPU) is only queued on the GPU's stream and the call returns at
  /// once, as in PyTorch; the result is safe to use in later GPU work, which runs after it. A
  /// copy from one GPU to another never makes the host wait, `non_blocking` or not (as in
  /// PyTorch): the streams of both GPUs order it.
  Tensor to(Device device, bool non_blocking = false) const;
  /// A contiguous copy in pinned (page-locked) host memory, from which GPU copies are faster
  /// and can be asynchronous (this tensor if it is already pinned). Needs a CUDA build.
  Tensor pin_memory() const;
  /// Whether the data lives in pinned host memory.
  bool is_pinned() const;
  /// The value of a one-element tensor, as double.
  double item() const;
  /// The value of a one-element tensor, as T.
  template <class T> T item() const;
  /// All elements in row-major order, converted to T.
  template <class T> std::vector<T> to_vector() const;

  // In-place updates (not recorded by autograd; used by optimisers under no_grad). Each one
  // counts in version(), so a backward that needs the old values refuses to run.
  // Const like every Tensor method: the handle is const, the data it points at is not.
  /// Sets every element to `value`.
  const Tensor& fill_(double value) const;
  /// Sets every element to 0.
  const Tensor& zero_() const;
  /// Copies `src` (same shape, or broadcastable to it) into this tensor, converting dtype.
  const Tensor& copy_(const Tensor& src) const;
  /// this += alpha * other (other broadcastable to this).
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  /// this *= value.
  const Tensor& mul_(double value) const;

  // Autograd
  /// Whether gradients flow to or through this tensor.
  bool requires_grad() const;
  /// Marks a leaf as requiring grad (only leaves may be changed); returns *this.
  const Tensor& requires_grad_(bool value = true) const;
  /// True for tensors not produced by a recorded operation (user-created, parameters).
  bool is_leaf() const;
  /// The accumulated gradient of a leaf (undefined until a backward reaches it).
  Tensor grad() const;
  /// Replaces the gradient (pass an undefined Tensor to clear it, as zero_grad(set_to_none)).
  void set_grad(const Tensor& grad) const;
  /// The node that produced this tensor in the autograd graph (null for leaves).
  const std::shared_ptr<Node>& grad_fn() const;
  /// Sets the producing node (used by ops when they record themselves).
  void set_grad_fn(std::shared_ptr<Node> node) const;
  /// Computes gradients of this tensor with respect to every leaf that requires grad and adds
  /// them into those leaves' grad(). A non-scalar needs an explicit `gradient` of the same
  /// shape. The graph is freed afterwards unless `retain_graph`.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// A new tensor sharing the data but cut from the graph (requires_grad false).
  Tensor detach() const;
  /// How many times this tensor's data has been changed in place (PyTorch's `_version`); views
  /// and detach() share the count with the tensor they come from. Autograd compares it with the
  /// version a saved tensor had when the forward pass saved it (tensor/autograd/saved_tensor.h).
  int64_t version() const;
  /// Makes this tensor refer to `source`'s data (storage, shape, strides, dtype) while keeping
  /// its identity and autograd fields: how Module::to moves a parameter in place, like
  /// PyTorch's `param.data = param.data.to(device)`. Any existing grad is dropped.
  void set_data(const Tensor& source) const;
  /// Registers `hook` to run each time this leaf's gradient has been completely accumulated
  /// during a backward pass (torch's register_post_accumulate_grad_hook).
  HookHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  /// Removes a hook registered on this tensor.
  void remove_hook(HookHandle handle) const;

  /// Formats like PyTorch's repr: `tensor([[1., 2.], [3., 4.]], requires_grad=True)`.
  std::string str() const;

 private:
  // The tensor unit's own files reach the implementation through TensorInternals
  // (tensor/tensor_impl.h); code above the unit sees only the methods.
  friend struct detail::TensorInternals;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<TensorImpl> impl_;
};

/// Prints Tensor::str().
std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

/// Records that `tensor`'s data was changed in place by code that wrote it directly (an
/// optimiser's fused kernel, a collective), as torch.autograd.graph.increment_version does.
/// The in-place methods of Tensor (fill_, copy_, add_, mul_) call it themselves.
void increment_version(const Tensor& tensor);

// Factories (like torch.zeros, torch.ones, ...)
/// Uninitialised contiguous tensor.
Tensor empty(const Shape& shape, const TensorOptions& options = {});
/// All zeros.
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
/// All ones.
Tensor ones(const Shape& shape, const TensorOptions& options = {});
/// All `value`.
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
/// start, start+step, ... up to (not including) end, as a 1-D tensor (dtype from options).
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& options = {});
/// Uniform in [0, 1), drawn from `generator` (the default generator if null).
Tensor rand(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
/// Standard normal, drawn from `generator` (the default generator if null).
Tensor randn(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
namespace detail {
/// from_vector's integer overload, for i64 values.
Tensor from_vector_i64(const std::vector<int64_t>& values, const Shape& shape, const TensorOptions& options);
}  // namespace detail
/// A tensor of `shape` holding `values` (row-major), converted to options' dtype.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, const TensorOptions& options = {});
/// An integer tensor of `shape` holding `values` exactly (class labels, counts): i64 unless
/// options set another dtype, as `torch.tensor([1, 2])` is int64. A braced list picks the
/// overload above, so integers in braces are written `std::vector<int64_t>{1, 2}`.
template <class Int, class = std::enable_if_t<std::is_integral_v<Int>>>
Tensor from_vector(const std::vector<Int>& values, const Shape& shape, const TensorOptions& options = {}) {
  return detail::from_vector_i64(std::vector<int64_t>(values.begin(), values.end()), shape, options);
}
/// Uninitialised tensor with the shape, dtype and device of `like`.
Tensor empty_like(const Tensor& like);

/// Strides that walk `t` as if it had shape `target` (broadcasting: size-1 or missing leading
/// dimensions get stride 0). Throws if `t` cannot broadcast to `target`; `op` names the caller.
Shape broadcast_strides(const Tensor& t, const Shape& target, const char* op);
/// Zeros with the shape, dtype and device of `like`.
Tensor zeros_like(const Tensor& like);
/// Ones with the shape, dtype and device of `like`.
Tensor ones_like(const Tensor& like);

}  // namespace lockstep
