// matmul and linear: shape checks, then the batched GEMM of the tensors' device
// (kernels::batched_gemm, tensor/ops/dispatch/matmul_kernels.h), which reads every operand
// through its own strides (a transposed view costs nothing).
#include "tensor/ops/matmul.h"

#include "tensor/autocast.h"

#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "tensor/copy.h"
#include "core/error.h"
#include "core/flop_count.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch/matmul_kernels.h"
#include "tensor/ops/reduce.h"

namespace lockstep {

namespace {

// A shape with its last two sizes replaced by (rows, cols).
Shape with_matrix(Shape shape, int64_t rows, int64_t cols) {
  shape[shape.size() - 2] = rows;
  shape[shape.size() - 1] = cols;
  return shape;
}

// out[i] = a[i] b[i] + beta * out[i] for every matrix i of out (batch..., M, N), contiguous, by
// the batched GEMM of out's device. a is walked with `a_strides` as if it had shape
// (batch..., M, K), b with `b_strides` as (batch..., K, N). 16-bit products are summed in an f32
// copy of out, rounded to out's dtype once at the end.
void batched_gemm(const char* op, const Tensor& a, const Shape& a_strides, const Tensor& b, const Shape& b_strides,
                  int64_t K, const Tensor& out, double beta) {
  const int64_t dims = out.dim();
  BatchedGemm g;
  g.batch.assign(out.shape().begin(), out.shape().end() - 2);
  g.a_batch_strides.assign(a_strides.begin(), a_strides.end() - 2);
  g.b_batch_strides.assign(b_strides.begin(), b_strides.end() - 2);
  g.M = out.size(-2);
  g.N = out.size(-1);
  g.K = K;
  g.a_row_stride = a_strides[dims - 2];
  g.a_col_stride = a_strides[dims - 1];
  g.b_row_stride = b_strides[dims - 2];
  g.b_col_stride = b_strides[dims - 1];
  const bool wide = out.dtype() == DType::f32 || out.dtype() == DType::f64;
  const Tensor sums = wide ? out : beta != 0.0 ? out.to(DType::f32) : empty(out.shape(), out.options().dtype(DType::f32));
  int64_t matrices = 1;
  for (int64_t size : g.batch) matrices *= size;
  count_flops(2 * matrices * g.M * g.N * g.K);
  kernels::batched_gemm.call(out.device(), op, a, b, sums, g, beta);
  if (!wide) copy_strided(sums, out);
}

// (..., M, K) x (..., K, N) for operands of at least 2 dimensions whose batches broadcast.
Tensor batched_matmul(const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape batch = broadcast_shapes("matmul", Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2));
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = empty(out_shape, a.options());
  batched_gemm("matmul", a, broadcast_strides(a, with_matrix(out_shape, M, K), "matmul"), b,
               broadcast_strides(b, with_matrix(out_shape, K, N), "matmul"), K, out, 0.0);

  // dA = dC B^T and dB = A^T dC, on transposed views; an operand that was broadcast over the
  // batch receives the sum of its gradients.
  const bool ra = a.requires_grad(), rb = b.requires_grad();  // which gradients are wanted
  return record(out, out.dim() == 2 ? "MmBackward" : "BmmBackward", {a, b},
                [a_saved = rb ? SavedTensor(a) : SavedTensor(), b_saved = ra ? SavedTensor(b) : SavedTensor(),
                 shape_a = a.shape(), shape_b = b.shape(), ra, rb](const Tensor& g) {
                  return std::vector<Tensor>{
                      ra ? sum_to(matmul(g, b_saved.unpack().transpose(-2, -1)), shape_a) : Tensor(),
                      rb ? sum_to(matmul(a_saved.unpack().transpose(-2, -1), g), shape_b) : Tensor()};
                });
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  // matmul is on autocast's lower-precision list.
  const Tensor a = autocast::to_lower_precision(a_in), b = autocast::to_lower_precision(b_in);
  check_same_device("matmul", {&a, &b});
  check_same_dtype("matmul", {&a, &b});
  LOCKSTEP_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ",
                 shape_str(a.shape()), " and ", shape_str(b.shape()));
  // The summed-over dimension: a's last, and b's second to last (its only one if b is 1-D).
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  LOCKSTEP_CHECK(ka == kb, "matmul: shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
                 " cannot be multiplied (", ka, " != ", kb, ")");

  // A vector is a one-row (a) or one-column (b) matrix whose extra dimension is dropped again.
  if (a.dim() == 1 || b.dim() == 1) {
    Tensor out = matmul(a.dim() == 1 ? a.unsqueeze(0) : a, b.dim() == 1 ? b.unsqueeze(1) : b);
    if (a.dim() == 1) out = out.squeeze(-2);
    if (b.dim() == 1) out = out.squeeze(-1);
    return out;
  }
  // (..., M, K) x (K, N): every row of every matrix meets the same b, so fold the batch into
  // the rows. One large GEMM is faster than many small ones, and so is the backward's dB.
  if (a.dim() > 2 && b.dim() == 2) {
    const int64_t rows = shape_numel(Shape(a.shape().begin(), a.shape().end() - 1));
    Shape out_shape = a.shape();
    out_shape.back() = b.size(1);
    return matmul(a.reshape({rows, ka}), b).reshape(out_shape);
  }
  return batched_matmul(a, b);
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  // linear is on autocast's lower-precision list: in a region all three become 16-bit, the
  // parameters through the cast cache.
  const Tensor x = autocast::to_lower_precision(x_in), weight = autocast::to_lower_precision(weight_in),
               bias = autocast::to_lower_precision(bias_in);
  check_same_device("linear", {&x, &weight});
  check_same_dtype("linear", {&x, &weight});
  LOCKSTEP_CHECK(weight.dim() == 2, "linear: expected weight to be 2-D (out_features, in_features), got shape ",
                 shape_str(weight.shape()));
  LOCKSTEP_CHECK(x.dim() >= 1, "linear: expected input of shape (..., in_features), got a 0-d tensor");
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  LOCKSTEP_CHECK(x.size(-1) == in_features, "linear: input has ", x.size(-1), " features (shape ",
                 shape_str(x.shape()), ") but weight expects ", in_features, " (weight shape ",
                 shape_str(weight.shape()), ")");
  if (bias.defined()) {
    check_same_device("linear", {&x, &bias});
    check_same_dtype("linear", {&x, &bias});
    LOCKSTEP_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "linear: expected bias of shape [", out_features,
                   "] (one per output feature), got ", shape_str(bias.shape()));
  }

  // x2: (rows, in). Every leading dimension of x is just more rows of the same product.
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const Tensor x2 = x.reshape({rows, in_features});
  // y: (rows, out). It starts as the bias in every row and the GEMM adds x W^T onto it
  // (beta = 1), so the bias costs no extra pass. W^T is W's data with its two strides swapped.
  Tensor y = empty({rows, out_features}, x.options());
  if (bias.defined()) y.copy_(bias);
  batched_gemm("linear", x2, x2.strides(), weight, {weight.stride(1), weight.stride(0)}, in_features, y,
               bias.defined() ? 1.0 : 0.0);

  // g: (rows, out). dx = g W: (rows, out) x (out, in); dW = g^T x: (out, rows) x (rows, in),
  // already in W's own layout; dbias = g summed over the rows.
  y = record(y, bias.defined() ? "AddmmBackward" : "MmBackward", {x2, weight, bias},
             [x_saved = weight.requires_grad() ? SavedTensor(x2) : SavedTensor(),
              w_saved = x2.requires_grad() ? SavedTensor(weight) : SavedTensor(), rx = x2.requires_grad(),
              rw = weight.requires_grad(), rb = bias.defined() && bias.requires_grad()](const Tensor& g) {
               return std::vector<Tensor>{rx ? matmul(g, w_saved.unpack()) : Tensor(),
                                          rw ? matmul(g.t(), x_saved.unpack()) : Tensor(), rb ? sum(g, {0}) : Tensor()};
             });
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  return y.reshape(out_shape);
}

}  // namespace lockstep
