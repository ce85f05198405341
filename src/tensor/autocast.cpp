// Autocast's per-thread state (one setting per device type, the region depth) and its cast
// cache.
#include "tensor/autocast.h"

#include <unordered_map>

#include "core/cuda/context.h"
#include "core/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/tensor.h"
#include "tensor/tensor_impl.h"

namespace lockstep {

namespace {

// One device type's setting.
struct Setting {
  bool enabled = false;
  DType dtype;
};

// A cached cast: the parameter it was made from (held, so that its address cannot be reused by
// another tensor while the entry lives), the parameter's version then, and the cast.
struct CachedCast {
  Tensor source;
  int64_t version;
  Tensor cast;
};

struct ThreadState {
  Setting cpu{false, DType::bf16};
  Setting cuda{false, DType::f16};
  int depth = 0;  // regions open, enabled or not
  std::unordered_map<const TensorImpl*, CachedCast> cache;
};

thread_local ThreadState state;

Setting& setting(DeviceType device_type) { return device_type == DeviceType::CUDA ? state.cuda : state.cpu; }

}  // namespace

bool is_autocast_enabled(DeviceType device_type) { return setting(device_type).enabled; }

DType get_autocast_dtype(DeviceType device_type) { return setting(device_type).dtype; }

size_t autocast_cache_size() { return state.cache.size(); }

AutocastGuard::AutocastGuard(DeviceType device_type, DType dtype, bool enabled) : device_type_(device_type) {
  LOCKSTEP_CHECK(dtype == DType::bf16 || dtype == DType::f16, "autocast: the dtype must be bf16 or f16, got ",
                 dtype_name(dtype));
  // As PyTorch does: a GPU without bf16 tensor cores is refused at the region, not at its first
  // matmul deep inside a model.
  if (enabled && device_type == DeviceType::CUDA && dtype == DType::bf16 && cuda_device_count() > 0) {
    const Device gpu = cuda::current_device();
    const int capability = cuda::compute_capability(gpu);
    LOCKSTEP_CHECK(capability >= 80, "autocast: ", gpu, " (", cuda::device_name(gpu), ") has compute capability ",
                   capability / 10, ".", capability % 10, "; bf16 needs 8.0 (Ampere) or newer: use DType::f16");
  }
  Setting& s = setting(device_type);
  previous_enabled_ = s.enabled;
  previous_dtype_ = s.dtype;
  s = {enabled, dtype};
  ++state.depth;
}

AutocastGuard::~AutocastGuard() {
  setting(device_type_) = {previous_enabled_, previous_dtype_};
  // Leaving the outermost region frees the casts: the next region casts the parameters again,
  // after the optimiser has changed them.
  if (--state.depth == 0) state.cache.clear();
}

namespace autocast {

Tensor to_lower_precision(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::f32) return t;
  const Setting& s = setting(t.device().type());
  if (!s.enabled) return t;
  // Only parameters are worth caching: activations are new tensors at every use.
  if (!(t.is_leaf() && t.requires_grad() && grad_mode_enabled())) return t.to(s.dtype);
  const TensorImpl* key = &detail::TensorInternals::impl(t);
  auto found = state.cache.find(key);
  if (found != state.cache.end() && found->second.version == t.version() && found->second.cast.dtype() == s.dtype) {
    return found->second.cast;
  }
  Tensor cast = t.to(s.dtype);
  state.cache[key] = CachedCast{t, t.version(), cast};
  return cast;
}

Tensor to_f32(const Tensor& t) {
  if (!t.defined() || !(t.dtype() == DType::f16 || t.dtype() == DType::bf16)) return t;
  return setting(t.device().type()).enabled ? t.to(DType::f32) : t;
}

Suspend::Suspend() : cpu_(state.cpu.enabled), cuda_(state.cuda.enabled) {
  state.cpu.enabled = false;
  state.cuda.enabled = false;
}

Suspend::~Suspend() {
  state.cpu.enabled = cpu_;
  state.cuda.enabled = cuda_;
}

}  // namespace autocast

}  // namespace lockstep
