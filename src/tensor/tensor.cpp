#include "tensor/tensor.h"
#include "tensor/tensor_impl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/autograd/grad_mode.h"
#include "tensor/copy.h"
#include "core/cuda/memory.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/generator.h"

namespace lockstep {

std::string shape_str(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape broadcast_strides(const Tensor& t, const Shape& target, const char* op) {
  const int64_t dims = static_cast<int64_t>(target.size());
  const int64_t lead = dims - t.dim();
  LOCKSTEP_CHECK(lead >= 0, op, ": cannot broadcast shape ", shape_str(t.shape()), " to ", shape_str(target));
  Shape strides(target.size(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t size = t.shape()[d];
    LOCKSTEP_CHECK(size == target[lead + d] || size == 1, op, ": cannot broadcast shape ", shape_str(t.shape()),
                   " to ", shape_str(target));
    strides[lead + d] = size == 1 ? 0 : t.strides()[d];
  }
  return strides;
}

int64_t wrap_dim(int64_t d, int64_t dims, const char* op, bool wrap_scalar) {
  // The message starts with the op's name where there is one: "softmax: dimension 2 is ...".
  const char* prefix = op != nullptr ? op : "";
  const char* colon = op != nullptr ? ": " : "";
  LOCKSTEP_CHECK(dims > 0 || wrap_scalar, prefix, colon, "dimension ", d,
                 " specified, but a 0-d tensor has no dimensions");
  const int64_t range = std::max<int64_t>(dims, 1);
  LOCKSTEP_CHECK(d >= -range && d < range, prefix, colon, "dimension ", d, " is out of range for a ", dims,
                 "-D tensor");
  return d < 0 ? d + range : d;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::optional<uint64_t> shape_nbytes(const Shape& shape, DType dtype) {
  constexpr auto kLimit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t nbytes = element_size(dtype);
  bool has_zero = false;
  for (int64_t d : shape) {
    if (d == 0) {
      has_zero = true;
      continue;
    }
    if (nbytes > kLimit / static_cast<uint64_t>(d)) return std::nullopt;
    nbytes *= static_cast<uint64_t>(d);
  }
  return has_zero ? 0 : nbytes;
}

namespace {
// Accessors must never be called on an undefined tensor: say so instead of crashing.
const TensorImpl& checked(const TensorImpl* impl) {
  LOCKSTEP_CHECK(impl != nullptr, "tensor is undefined (default-constructed, or a gradient that was never computed)");
  return *impl;
}
}  // namespace

const Shape& Tensor::shape() const { return checked(impl_.get()).shape; }
const Shape& Tensor::strides() const { return checked(impl_.get()).strides; }
int64_t Tensor::offset() const { return checked(impl_.get()).offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), nullptr, false)]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), nullptr, false)]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
int64_t Tensor::nbytes() const { return numel() * static_cast<int64_t>(element_size(dtype())); }
DType Tensor::dtype() const { return checked(impl_.get()).dtype; }
Device Tensor::device() const { return checked(impl_.get()).storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_.get()).storage; }

bool Tensor::is_contiguous() const {
  // An empty tensor has no elements to be out of order (PyTorch agrees); dimensions of size 1
  // may have any stride; the others must match row-major order.
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

void* Tensor::data() const {
  // An FSDP parameter between its all-gathers has no bytes (Storage::resize(0)).
  LOCKSTEP_CHECK(storage()->nbytes() != 0 || numel() == 0, "the memory of this ", shape_str(shape()),
                 " tensor has been freed (FSDP frees a unit's whole parameters between its forward and "
                 "backward): read its values through the FSDP module, which gathers them (full_state_dict, unshard), "
                 "or give the optimiser the sharded parameters of FSDPModule::parameters()");
  return static_cast<char*>(storage()->data()) + offset() * static_cast<int64_t>(element_size(dtype()));
}

template <class T>
T* Tensor::data_ptr() const {
  LOCKSTEP_CHECK(dtype_of<T>::value == dtype(), "data_ptr: the tensor holds ", dtype_name(dtype()),
                 " but ", dtype_name(dtype_of<T>::value), " was asked for");
  return static_cast<T*>(data());
}

// ---- factories ---------------------------------------------------------------------------

Tensor empty(const Shape& shape, const TensorOptions& options) {
  for (int64_t s : shape) LOCKSTEP_CHECK(s >= 0, "cannot create a tensor with negative size in shape ", shape_str(shape));
  const std::optional<uint64_t> nbytes = shape_nbytes(shape, options.dtype());
  LOCKSTEP_CHECK(nbytes, "cannot create a tensor of shape ", shape_str(shape), " and dtype ", dtype_name(options.dtype()),
                 ": its sizes (zeros aside) times ", element_size(options.dtype()),
                 " bytes reach 2^63, too many to address; check the sizes for a mistake");
  auto impl = std::make_shared<TensorImpl>();
  LOCKSTEP_CHECK(!options.pinned_memory() || options.device().is_cpu(), "empty: only CPU memory can be pinned, ",
                 options.device(), " was asked for");
  Allocator& allocator = options.pinned_memory() ? cuda::pinned_allocator() : allocator_for(options.device());
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(*nbytes), allocator);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype();
  Tensor result = detail::TensorInternals::wrap(std::move(impl));
  if (options.requires_grad()) result.requires_grad_(true);
  return result;
}

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  // Filled directly, not with fill_: a new tensor starts at version 0, as in PyTorch.
  Tensor result = empty(shape, options);
  fill_strided(result, value);
  return result;
}

Tensor zeros(const Shape& shape, const TensorOptions& options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1.0, options); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  LOCKSTEP_CHECK(step != 0.0, "arange: step must be non-zero");
  const auto n = static_cast<int64_t>(std::max(0.0, std::ceil((end - start) / step)));
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return from_vector(values, {n}, options);
}

namespace {
// Draw on the CPU in row-major order (so a seed gives the same tensor on every device).
template <class Draw>
Tensor random_tensor(const Shape& shape, const TensorOptions& options, Draw draw) {
  LOCKSTEP_CHECK(is_floating(options.dtype()), "rand/randn: expected a floating dtype, got ",
                 dtype_name(options.dtype()));
  // Drawn straight into the tensor's own memory: the allocator says so if it does not fit.
  Tensor host = empty(shape, TensorOptions().dtype(options.dtype()));
  dispatch_all(options.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = host.data_ptr<T>();
    const int64_t count = host.numel();
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(draw());
  });
  Tensor result = host.to(options.device());
  if (options.requires_grad()) result.requires_grad_(true);
  return result;
}
}  // namespace

Tensor rand(const Shape& shape, const TensorOptions& options, Generator* generator) {
  const auto lock = lock_default_generator(generator);
  Generator& g = generator ? *generator : default_generator();
  return random_tensor(shape, options, [&] { return g.uniform(); });
}

Tensor randn(const Shape& shape, const TensorOptions& options, Generator* generator) {
  const auto lock = lock_default_generator(generator);
  Generator& g = generator ? *generator : default_generator();
  return random_tensor(shape, options, [&] { return g.normal(); });
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, const TensorOptions& options) {
  LOCKSTEP_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
                 " values cannot fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor host = empty(shape, TensorOptions().dtype(options.dtype()));
  dispatch_all(options.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = host.data_ptr<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values[i]);
  });
  Tensor result = host.to(options.device());
  if (options.requires_grad()) result.requires_grad_(true);
  return result;
}

Tensor detail::from_vector_i64(const std::vector<int64_t>& values, const Shape& shape, const TensorOptions& options) {
  LOCKSTEP_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
                 " values cannot fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  // Every int64 value fits i64 exactly; another dtype, when one is asked for, converts from it.
  Tensor host = empty(shape, TensorOptions().dtype(DType::i64));
  std::copy(values.begin(), values.end(), host.data_ptr<int64_t>());
  Tensor result = host.to(options.has_dtype() ? options.dtype() : DType::i64).to(options.device());
  if (options.requires_grad()) result.requires_grad_(true);
  return result;
}

Tensor empty_like(const Tensor& like) {
  return empty(like.shape(), like.options());
}
Tensor zeros_like(const Tensor& like) {
  return zeros(like.shape(), like.options());
}
Tensor ones_like(const Tensor& like) {
  return ones(like.shape(), like.options());
}

// ---- values ------------------------------------------------------------------------------

template <class T>
std::vector<T> Tensor::to_vector() const {
  LOCKSTEP_CHECK(device().is_cpu(), "to_vector: the tensor is on ", device(), "; copy it with .to(Device::cpu()) first");
  const Tensor dense = contiguous();
  std::vector<T> values(static_cast<size_t>(numel()));
  dispatch_all(dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* in = dense.data_ptr<S>();
    // Same type: copy exactly (an i64 beyond 2^53 would not survive a trip through double).
    if constexpr (std::is_same_v<S, T>) {
      std::copy(in, in + values.size(), values.begin());
    } else {
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(static_cast<double>(in[i]));
    }
  });
  return values;
}

template <class T>
T Tensor::item() const {
  LOCKSTEP_CHECK(numel() == 1, "item: only a one-element tensor can be converted to a number, this one has shape ",
                 shape_str(shape()));
  return detach().to(Device::cpu()).to_vector<T>()[0];
}

double Tensor::item() const { return item<double>(); }

// ---- in-place updates ----------------------------------------------------------------------

namespace {
// A tensor that requires grad takes part in the graph being recorded, and Lockstep records no
// in-place op but relu_ (which checks for itself), so while recording such a tensor is
// read-only to these methods. Any other tensor may be changed; if the forward pass saved it,
// the version count makes backward refuse to use it (docs/conventions.md, "Autograd and
// in-place updates").
void check_inplace_allowed(const Tensor& t, const char* op) {
  LOCKSTEP_CHECK(!(t.requires_grad() && grad_mode_enabled()), op,
                 ": a tensor that requires grad cannot be modified in place while gradients are recorded "
                 "(wrap the update in NoGradGuard, as optimisers do)");
}
}  // namespace

void increment_version(const Tensor& tensor) { tensor.storage()->bump_version(); }

const Tensor& Tensor::fill_(double value) const {
  check_inplace_allowed(*this, "fill_");
  fill_strided(*this, value);
  increment_version(*this);
  return *this;
}

const Tensor& Tensor::zero_() const { return fill_(0.0); }

const Tensor& Tensor::copy_(const Tensor& src) const {
  check_inplace_allowed(*this, "copy_");
  copy_strided(src, *this);
  increment_version(*this);
  return *this;
}

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  check_inplace_allowed(*this, "add_");
  axpy_strided(alpha, other, *this);
  increment_version(*this);
  return *this;
}

const Tensor& Tensor::mul_(double value) const {
  check_inplace_allowed(*this, "mul_");
  scale_strided(value, *this);
  increment_version(*this);
  return *this;
}

// ---- autograd fields ---------------------------------------------------------------------

bool Tensor::requires_grad() const { return checked(impl_.get()).autograd.requires_grad; }

const Tensor& Tensor::requires_grad_(bool value) const {
  LOCKSTEP_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad; call detach() first "
                            "to get a leaf");
  LOCKSTEP_CHECK(!value || is_floating(dtype()), "requires_grad_: only floating-point tensors can require grad, this "
                                                 "one is ", dtype_name(dtype()));
  impl_->autograd.requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const { return checked(impl_.get()).autograd.grad_fn == nullptr; }
Tensor Tensor::grad() const { return checked(impl_.get()).autograd.grad; }

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    LOCKSTEP_CHECK(grad.shape() == shape(), "set_grad: gradient shape ", shape_str(grad.shape()),
                   " does not match tensor shape ", shape_str(shape()));
    LOCKSTEP_CHECK(grad.device() == device(), "set_grad: gradient is on ", grad.device(), " but the tensor is on ",
                   device());
  }
  impl_->autograd.grad = grad;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const { return checked(impl_.get()).autograd.grad_fn; }

void Tensor::set_grad_fn(std::shared_ptr<Node> node) const {
  impl_->autograd.grad_fn = std::move(node);
  impl_->autograd.requires_grad = impl_->autograd.grad_fn != nullptr;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage();
  impl->shape = shape();
  impl->strides = strides();
  impl->offset = offset();
  impl->dtype = dtype();
  return detail::TensorInternals::wrap(std::move(impl));
}

int64_t Tensor::version() const { return storage()->version(); }

void Tensor::set_data(const Tensor& source) const {
  checked(impl_.get());
  LOCKSTEP_CHECK(!requires_grad() || is_floating(source.dtype()), "set_data: a tensor that requires grad needs floating "
                                                                 "data, got ", dtype_name(source.dtype()));
  impl_->storage = source.storage();
  impl_->shape = source.shape();
  impl_->strides = source.strides();
  impl_->offset = source.offset();
  impl_->dtype = source.dtype();
  impl_->autograd.grad = Tensor();
}

HookHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  LOCKSTEP_CHECK(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook: only leaf tensors that require "
                                               "grad accumulate gradients");
  static std::atomic<HookHandle> next_handle{1};
  const HookHandle handle = next_handle++;
  impl_->autograd.post_accumulate_grad_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void Tensor::remove_hook(HookHandle handle) const {
  checked(impl_.get());
  auto& hooks = impl_->autograd.post_accumulate_grad_hooks;
  for (auto it = hooks.begin(); it != hooks.end(); ++it) {
    if (it->first == handle) {
      hooks.erase(it);
      return;
    }
  }
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << tensor.str(); }

// The typed accessors exist for every element type.
#define LOCKSTEP_INSTANTIATE(T)                               \
  template T* Tensor::data_ptr<T>() const;                    \
  template T Tensor::item<T>() const;                         \
  template std::vector<T> Tensor::to_vector<T>() const;
LOCKSTEP_INSTANTIATE(float)
LOCKSTEP_INSTANTIATE(double)
LOCKSTEP_INSTANTIATE(int64_t)
LOCKSTEP_INSTANTIATE(int32_t)
LOCKSTEP_INSTANTIATE(uint8_t)
LOCKSTEP_INSTANTIATE(bool)
#undef LOCKSTEP_INSTANTIATE
template Half* Tensor::data_ptr<Half>() const;
template BFloat16* Tensor::data_ptr<BFloat16>() const;

}  // namespace lockstep
