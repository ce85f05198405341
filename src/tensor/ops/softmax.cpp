#include "tensor/ops/softmax.h"

#include "tensor/autocast.h"
#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch/softmax_kernels.h"

namespace lockstep {

namespace {

// softmax (log = false) or log_softmax (log = true): one kernel forward, one kernel backward.
// Both are on autocast's f32 list: exponentials of 16-bit inputs lose too much.
Tensor softmax_op(const char* name, const char* backward_name, bool log, const Tensor& a_in, int64_t dim) {
  check_defined(name, {&a_in});
  const Tensor a = autocast::to_f32(a_in);
  const int64_t d = wrap_dim(dim, a.dim(), name);
  Tensor out = empty(a.shape(), a.options());
  kernels::softmax.call(out.device(), a.detach(), d, log, out);
  // Both backward formulas need only the output, not the input: save that.
  return record(out, backward_name, {a}, [out = SavedTensor(out), d, log](const Tensor& g) {
    const Tensor y = out.unpack();
    Tensor grad = empty(y.shape(), y.options());
    kernels::softmax_backward.call(grad.device(), g, y, d, log, grad);
    return std::vector<Tensor>{grad};
  });
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) { return softmax_op("softmax", "SoftmaxBackward", false, a, dim); }

Tensor log_softmax(const Tensor& a, int64_t dim) {
  return softmax_op("log_softmax", "LogSoftmaxBackward", true, a, dim);
}

}  // namespace lockstep
