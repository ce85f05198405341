#include "tensor/ops/batch_norm.h"

#include <tuple>
#include <utility>

#include "tensor/autograd/node.h"
#include "tensor/autograd/saved_tensor.h"
#include "core/error.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/cat.h"
#include "tensor/ops/dispatch/batch_norm_kernels.h"

namespace lockstep {

namespace {

bool is_16bit(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

// The dtype of the per-channel tensors the kernels take and return: f32 for a 16-bit input,
// whose statistics 16 bits would hold too coarsely (PyTorch's mixed batch norm, which autocast
// relies on), the input's own dtype otherwise.
DType channel_dtype(const Tensor& input) { return is_16bit(input.dtype()) ? DType::f32 : input.dtype(); }

// Checks an optional per-channel argument: one value per channel, on input's device, in
// input's dtype or, for a 16-bit input, in f32.
void check_per_channel(const Tensor& t, const char* what, const Tensor& input) {
  if (!t.defined()) return;
  LOCKSTEP_CHECK(t.dim() == 1 && t.size(0) == input.size(1), "batch_norm: expected ", what, " to have shape [",
                 input.size(1), "] (one value per channel of input shape ", shape_str(input.shape()), "), got shape ",
                 shape_str(t.shape()));
  check_same_device("batch_norm", {&input, &t});
  if (!is_16bit(input.dtype())) return check_same_dtype("batch_norm", {&input, &t});
  LOCKSTEP_CHECK(t.dtype() == DType::f32 || t.dtype() == input.dtype(), "batch_norm: expected ", what, " of a ",
                 dtype_name(input.dtype()), " input to be f32 or ", dtype_name(input.dtype()), ", got ",
                 dtype_name(t.dtype()));
}

// `t` in the kernels' per-channel dtype: itself, or a converted copy that autograd records, so
// that the gradient of a 16-bit weight comes back in 16 bits.
Tensor in_channel_dtype(const Tensor& t, const Tensor& input) { return t.defined() ? t.to(channel_dtype(input)) : t; }

bool needs_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight_in,
                  const Tensor& bias_in, bool training, double momentum, double eps) {
  check_defined("batch_norm", {&input});
  LOCKSTEP_CHECK(input.dim() == 2 || input.dim() == 4,
                 "batch_norm: expected input to be 2-D (N, C) or 4-D (N, C, H, W), got shape ", shape_str(input.shape()));
  check_per_channel(weight_in, "weight", input);
  check_per_channel(bias_in, "bias", input);
  check_per_channel(running_mean, "running_mean", input);
  check_per_channel(running_var, "running_var", input);
  LOCKSTEP_CHECK(running_mean.defined() == running_var.defined(),
                 "batch_norm: expected running_mean and running_var to be both given or both undefined");
  // n: how many values each channel's statistics are taken over, N * H * W.
  const int64_t count = input.size(0) * (input.dim() == 4 ? input.size(2) * input.size(3) : 1);
  LOCKSTEP_CHECK(!training || count != 1, "batch_norm: expected more than 1 value per channel when training, got input shape ",
                 shape_str(input.shape()));

  // The kernels run where the tensors live: tensor/ops/cuda/ on a GPU, tensor/ops/cpu/ on the CPU.
  const Device device = input.device();
  // A 16-bit input with a 16-bit weight and bias (a model converted with .to(DType::bf16))
  // gets f32 copies of them, as every per-channel tensor of a 16-bit batch norm is f32.
  const Tensor weight = in_channel_dtype(weight_in, input), bias = in_channel_dtype(bias_in, input);
  // Without running statistics there is nothing but the batch to normalise with.
  const bool use_batch_stats = training || !running_mean.defined();
  Tensor mean, invstd;  // (C)
  if (use_batch_stats) {
    // SyncBatchNorm replaces exactly this step: it all-gathers every rank's (mean, invstd,
    // count) and merges them into global statistics before normalising.
    std::tie(mean, invstd) = kernels::batch_norm_stats.call(device, input, eps);
    // Running statistics are buffers, not parameters: updated in place, never recorded.
    if (running_mean.defined() && count > 0) {
      // 16-bit ones (a converted model) are updated in f32 copies, then rounded back once.
      const Tensor rm = in_channel_dtype(running_mean, input), rv = in_channel_dtype(running_var, input);
      kernels::batch_norm_update_stats.call(device, rm, rv, mean, invstd, eps, count, momentum);
      for (const auto& [buffer, updated] : {std::pair{running_mean, rm}, std::pair{running_var, rv}}) {
        if (buffer.dtype() == updated.dtype()) {
          increment_version(buffer);
        } else {
          buffer.copy_(updated);
        }
      }
    }
  } else {
    // A copy, so that a later training step updating running_mean in place cannot change
    // what this step's backward uses.
    mean = in_channel_dtype(running_mean.detach(), input).clone();
    invstd = kernels::batch_norm_invstd.call(device, in_channel_dtype(running_var, input), eps);
  }
  Tensor out = empty(input.shape(), input.options());
  kernels::batch_norm_elemt.call(device, input, mean, invstd, weight, bias, out);

  return record(
      out, "NativeBatchNormBackward", {input, weight, bias},
      [x_saved = SavedTensor(input), weight_saved = SavedTensor(weight), mean, invstd, count, use_batch_stats, device,
       need_input = needs_grad(input), need_weight = needs_grad(weight),
       need_bias = needs_grad(bias)](const Tensor& g) {
        const Tensor x = x_saved.unpack(), weight = weight_saved.unpack();
        std::vector<Tensor> grads(3);  // input, weight, bias
        // The per-channel sums give the weight and bias gradients, and in training also
        // enter the input gradient (SyncBatchNorm all-reduces them across ranks first).
        if (need_weight || need_bias || (need_input && use_batch_stats)) {
          Tensor sum_dy, sum_dy_xmu;
          std::tie(sum_dy, sum_dy_xmu) = kernels::batch_norm_backward_reduce.call(device, g, x, mean);
          if (need_weight) grads[1] = mul(sum_dy_xmu, invstd);  // sum(dy * xhat)
          if (need_bias) grads[2] = sum_dy;
          if (need_input && use_batch_stats) {
            // The batch mean and variance depend on every input, hence the two extra terms.
            grads[0] = empty(x.shape(), x.options());
            kernels::batch_norm_backward_elemt.call(device, g, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count,
                                                    grads[0]);
          }
        }
        // In eval mode mean and invstd are constants: the op is a per-channel affine map, and
        // its input gradient g * invstd * weight is batch_norm_elemt's pass with mean 0 and no
        // bias (in g's dtype, rounded once).
        if (need_input && !use_batch_stats) {
          grads[0] = empty(g.shape(), g.options());
          kernels::batch_norm_elemt.call(device, g, zeros_like(invstd), invstd, weight, Tensor(), grads[0]);
        }
        return grads;
      });
}

Tensor sync_batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight_in, const Tensor& bias_in, double momentum, double eps,
                       const BatchNormCollectives& collectives) {
  check_defined("sync_batch_norm", {&input});
  LOCKSTEP_CHECK(input.dim() == 2 || input.dim() == 4,
                 "sync_batch_norm: expected input to be 2-D (N, C) or 4-D (N, C, H, W), got shape ",
                 shape_str(input.shape()));
  check_per_channel(weight_in, "weight", input);
  check_per_channel(bias_in, "bias", input);
  check_per_channel(running_mean, "running_mean", input);
  check_per_channel(running_var, "running_var", input);
  LOCKSTEP_CHECK(running_mean.defined() == running_var.defined(),
                 "sync_batch_norm: expected running_mean and running_var to be both given or both undefined");
  LOCKSTEP_CHECK(collectives.all_gather && collectives.all_reduce_sum,
                 "sync_batch_norm: expected both collectives (all_gather and all_reduce_sum) to be given");
  const int64_t C = input.size(1);
  LOCKSTEP_CHECK(C > 0, "sync_batch_norm: expected at least one channel, got input shape ", shape_str(input.shape()));

  const Device device = input.device();
  const Tensor weight = in_channel_dtype(weight_in, input), bias = in_channel_dtype(bias_in, input);

  // This rank's statistics, one row: [mean (C) | var (C) | count], f64. -> (1, 2C + 1)
  const Tensor local = kernels::batch_norm_local_stats.call(device, input).reshape({1, 2 * C + 1});
  // Every rank's row, rank 0's first: (world, 2C + 1). A rank with no images sends count 0.
  const Tensor gathered = collectives.all_gather(local);
  LOCKSTEP_CHECK(gathered.dim() == 2 && gathered.size(1) == 2 * C + 1 && gathered.dtype() == DType::f64 &&
                     gathered.device() == device,
                 "sync_batch_norm: the all_gather collective returned shape ", shape_str(gathered.shape()), " ",
                 dtype_name(gathered.dtype()), " on ", gathered.device().str(), "; expected (world, ", 2 * C + 1,
                 ") f64 on ", device.str());
  // The total count, on the host: the input gradient's formula needs it as a number, and every
  // rank sees the same one, so a bad total stops every rank alike instead of leaving some waiting.
  double total = 0.0;
  for (double n : gathered.select(1, 2 * C).to(Device::cpu()).to_vector<double>()) total += n;
  const auto count = static_cast<int64_t>(total);
  LOCKSTEP_CHECK(count > 1, "SyncBatchNorm: expected more than 1 value per channel over all ranks when training, got ",
                 count, " in total (this rank's input has shape ", shape_str(input.shape()),
                 "); use larger batches, or put the model in eval mode");

  // The global statistics, merged by count; the running statistics move towards them
  //    (16-bit ones in f32 copies, rounded back once, as batch_norm does).
  Tensor mean, invstd;  // (C)
  const Tensor rm = in_channel_dtype(running_mean, input), rv = in_channel_dtype(running_var, input);
  std::tie(mean, invstd) =
      kernels::batch_norm_gather_stats.call(device, gathered, rm, rv, momentum, eps, channel_dtype(input));
  if (running_mean.defined()) {
    for (const auto& [buffer, updated] : {std::pair{running_mean, rm}, std::pair{running_var, rv}}) {
      if (buffer.dtype() == updated.dtype()) {
        increment_version(buffer);
      } else {
        buffer.copy_(updated);
      }
    }
  }

  // Normalise this rank's slice with the global statistics.
  Tensor out = empty(input.shape(), input.options());
  kernels::batch_norm_elemt.call(device, input, mean, invstd, weight, bias, out);

  return record(
      out, "SyncBatchNormBackward", {input, weight, bias},
      [x_saved = SavedTensor(input), weight_saved = SavedTensor(weight), mean, invstd, count, device, C,
       all_reduce_sum = collectives.all_reduce_sum, need_input = needs_grad(input), need_weight = needs_grad(weight),
       need_bias = needs_grad(bias)](const Tensor& g) {
        const Tensor x = x_saved.unpack(), weight = weight_saved.unpack();
        std::vector<Tensor> grads(3);  // input, weight, bias
        // This rank's sums, (C) each: the weight and bias gradients are these local ones.
        Tensor sum_dy, sum_dy_xmu;
        std::tie(sum_dy, sum_dy_xmu) = kernels::batch_norm_backward_reduce.call(device, g, x, mean);
        if (need_weight) grads[1] = mul(sum_dy_xmu, invstd);  // sum(dy * xhat) over this rank
        if (need_bias) grads[2] = sum_dy;
        if (need_input) {
          // The global mean and variance depend on every rank's inputs: the input gradient
          // needs the sums over all ranks. One packed all-reduce: (2C) = [sum_dy | sum_dy_xmu].
          const Tensor sums = cat({sum_dy, sum_dy_xmu});
          all_reduce_sum(sums);
          grads[0] = empty(x.shape(), x.options());
          kernels::batch_norm_backward_elemt.call(device, g, x, mean, invstd, weight, sums.slice(0, 0, C),
                                                  sums.slice(0, C, 2 * C), count, grads[0]);
        }
        return grads;
      });
}

}  // namespace lockstep
