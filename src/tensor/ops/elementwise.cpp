#include "tensor/ops/elementwise.h"

#include <optional>

#include "tensor/autocast.h"

#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/rules/relu_mask.h"
#include "tensor/ops/dispatch/elementwise_kernels.h"
#include "tensor/ops/dispatch/relu_kernels.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

Tensor scalar_like(double value, const Tensor& like) {
  return full({}, value, like.options());
}

namespace {

// Checks, allocates the broadcast output and runs the kernel; no autograd.
Tensor binary_forward(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype) {
  check_same_device(name, {&a, &b});
  check_same_dtype(name, {&a, &b});
  Tensor out = empty(broadcast_shapes(name, a.shape(), b.shape()), TensorOptions().dtype(out_dtype).device(a.device()));
  kernels::binary.call(out.device(), name, op, a, b, out);
  return out;
}

// PyTorch's type promotion for two floating dtypes: the wider one (f32 over f16 and bf16, f64
// over all); f16 with bf16, neither of which holds the other, gives f32. Empty when the dtypes
// already agree or are not both floating (the same-dtype check then speaks).
std::optional<DType> promoted_dtype(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype()) return std::nullopt;
  if (!is_floating(a.dtype()) || !is_floating(b.dtype())) return std::nullopt;
  const auto rank = [](DType t) { return t == DType::f64 ? 2 : t == DType::f32 ? 1 : 0; };
  if (rank(a.dtype()) == 0 && rank(b.dtype()) == 0) return DType::f32;
  return rank(a.dtype()) > rank(b.dtype()) ? a.dtype() : b.dtype();
}

Tensor arithmetic(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  return binary_forward(name, op, a, b, a.dtype());
}

Tensor comparison(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  return binary_forward(name, op, a, b, DType::boolean);
}

Tensor unary_forward(const char* name, UnaryOp op, const Tensor& a) {
  check_defined(name, {&a});
  Tensor out = empty(a.shape(), a.options());
  kernels::unary.call(out.device(), name, op, a, out);
  return out;
}

}  // namespace

// Broadcasting in the forward pass means summing in the backward pass: each input's gradient
// is the output gradient reduced back to that input's shape (sum_to).

Tensor add(const Tensor& a, const Tensor& b) {
  if (const auto dtype = promoted_dtype(a, b)) return add(a.to(*dtype), b.to(*dtype));
  Tensor out = arithmetic("add", BinaryOp::Add, a, b);
  return record(out, "AddBackward", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (const auto dtype = promoted_dtype(a, b)) return sub(a.to(*dtype), b.to(*dtype));
  Tensor out = arithmetic("sub", BinaryOp::Sub, a, b);
  return record(out, "SubBackward", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

//! [mul]
Tensor mul(const Tensor& a, const Tensor& b) {
  if (const auto dtype = promoted_dtype(a, b)) return mul(a.to(*dtype), b.to(*dtype));
  Tensor out = arithmetic("mul", BinaryOp::Mul, a, b);
  // d(ab)/da = b, d(ab)/db = a. Each input is saved only when the other one's gradient is
  // wanted; a SavedTensor notices if it is changed in place before backward reads it.
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return record(out, "MulBackward", {a, b},
                [a_saved = need_b ? SavedTensor(a) : SavedTensor(), b_saved = need_a ? SavedTensor(b) : SavedTensor(),
                 shape_a = a.shape(), shape_b = b.shape(), need_a, need_b](const Tensor& g) {
                  return std::vector<Tensor>{need_a ? sum_to(mul(g, b_saved.unpack()), shape_a) : Tensor(),
                                             need_b ? sum_to(mul(g, a_saved.unpack()), shape_b) : Tensor()};
                });
}
//! [mul]

Tensor div(const Tensor& a, const Tensor& b) {
  if (const auto dtype = promoted_dtype(a, b)) return div(a.to(*dtype), b.to(*dtype));
  Tensor out = arithmetic("div", BinaryOp::Div, a, b);
  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b.
  const bool need_b = b.requires_grad();
  return record(out, "DivBackward", {a, b},
                [b_saved = SavedTensor(b), out_saved = need_b ? SavedTensor(out) : SavedTensor(), shape_a = a.shape(),
                 shape_b = b.shape(), need_b](const Tensor& g) {
                  const Tensor ga = div(g, b_saved.unpack());
                  return std::vector<Tensor>{sum_to(ga, shape_a),
                                             need_b ? sum_to(neg(mul(ga, out_saved.unpack())), shape_b) : Tensor()};
                });
}

Tensor neg(const Tensor& a) {
  Tensor out = unary_forward("neg", UnaryOp::Neg, a);
  return record(out, "NegBackward", {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

// exp and log are on autocast's f32 list: their results span a range 16 bits cannot hold.
Tensor exp(const Tensor& a_in) {
  const Tensor a = autocast::to_f32(a_in);
  Tensor out = unary_forward("exp", UnaryOp::Exp, a);
  return record(out, "ExpBackward", {a}, [out = SavedTensor(out)](const Tensor& g) {
    return std::vector<Tensor>{mul(g, out.unpack())};
  });
}

Tensor log(const Tensor& a_in) {
  const Tensor a = autocast::to_f32(a_in);
  Tensor out = unary_forward("log", UnaryOp::Log, a);
  return record(out, "LogBackward", {a}, [a = SavedTensor(a)](const Tensor& g) {
    return std::vector<Tensor>{div(g, a.unpack())};
  });
}

// Sigmoid's and tanh's derivatives are cheapest in terms of their own output, so they save it
// and use a fused backward kernel.
namespace {
Tensor activation(const char* name, const char* backward_name, UnaryOp op, BinaryOp backward_op, const Tensor& a) {
  Tensor out = unary_forward(name, op, a);
  return record(out, backward_name, {a}, [out = SavedTensor(out), backward_op, name](const Tensor& g) {
    return std::vector<Tensor>{binary_forward(name, backward_op, g, out.unpack(), g.dtype())};
  });
}
}  // namespace

//! [relu]
// ReLU's gradient passes where the output is positive (or NaN) and is zero elsewhere, so its
// backward needs one bit per element rather than the output (PyTorch saves the output):
// the output's memory is free again once the next layer has read it.
namespace {
// Runs relu into `out` (which may be `x` itself) and records ReluBackward on it, with the mask.
Tensor relu_recorded(const Tensor& a, const Tensor& x, const Tensor& out) {
  // mask: bit i of byte i / 8 set where element i passes (tensor/ops/rules/relu_mask.h).
  const Tensor mask = empty({relu_mask_bytes(x.numel())}, TensorOptions().dtype(DType::u8).device(x.device()));
  kernels::relu.call(out.device(), x, out, mask);
  return record(out, "ReluBackward", {a}, [mask](const Tensor& g) {
    const Tensor grad = g.contiguous();
    Tensor grad_input = empty(grad.shape(), grad.options());
    kernels::relu_backward.call(grad_input.device(), grad, mask, grad_input);
    return std::vector<Tensor>{grad_input};
  });
}
}  // namespace

Tensor relu(const Tensor& a) {
  check_defined("relu", {&a});
  if (!any_requires_grad({a})) return unary_forward("relu", UnaryOp::Relu, a);
  const Tensor x = a.detach().contiguous();
  return relu_recorded(a, x, empty(x.shape(), x.options()));
}
//! [relu]

//! [relu_]
// In place, ReLU needs no memory for its output at all. The op before it must not need its own
// output for backward: conv2d, linear and batch_norm save their inputs, not their outputs. The
// tensor's history moves on: its grad_fn becomes ReluBackward, whose edge leads to the node that
// made it.
const Tensor& relu_(const Tensor& a) {
  check_defined("relu_", {&a});
  if (!any_requires_grad({a})) {
    kernels::unary.call(a.device(), "relu_", UnaryOp::Relu, a, a);
    increment_version(a);
    return a;
  }
  LOCKSTEP_CHECK(!a.is_leaf(), "relu_: a leaf tensor that requires grad cannot be changed in place while gradients "
                 "are recorded (its gradient would be for values it no longer holds); use relu");
  // Another tensor on the same memory (a view, or a copy an op saved) would see the new values
  // under its old history: only a tensor that is alone on its memory is changed.
  LOCKSTEP_CHECK(a.is_contiguous() && a.storage().use_count() == 1,
                 "relu_: while gradients are recorded, the tensor must be contiguous and share its memory with no "
                 "other tensor (a view of it, or a copy saved for backward), got ",
                 a.is_contiguous() ? "a tensor that shares its memory" : "a non-contiguous tensor", "; use relu");
  relu_recorded(a, a, a);
  increment_version(a);
  return a;
}
//! [relu_]
Tensor sigmoid(const Tensor& a) {
  return activation("sigmoid", "SigmoidBackward", UnaryOp::Sigmoid, BinaryOp::SigmoidBackward, a);
}
Tensor tanh(const Tensor& a) { return activation("tanh", "TanhBackward", UnaryOp::Tanh, BinaryOp::TanhBackward, a); }

Tensor eq(const Tensor& a, const Tensor& b) { return comparison("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return comparison("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return comparison("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return comparison("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return comparison("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return comparison("ge", BinaryOp::Ge, a, b); }

}  // namespace lockstep
