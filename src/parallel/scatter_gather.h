/// \file
/// The two ends of a DataParallel step (torch.nn.parallel.scatter_gather): scatter cuts the
/// batch into one chunk per device, gather joins the replicas' outputs on one device. Both are
/// recorded by autograd, so gradients flow back through them.
#pragma once

#include <vector>

#include "core/device.h"
#include "tensor/tensor.h"

namespace lockstep {

/// Splits `input` (B, ...) along dim 0 as `chunk(devices.size())` does: chunks of ceil(B / n)
/// rows, the last one smaller, and only as many chunks as that takes (13 rows on 6 devices:
/// 3, 3, 3, 3, 1, five chunks, so only five replicas run). Chunk i goes to devices[i]: a view of
/// `input` when it is already there, otherwise a copy (non-blocking from pinned memory).
std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices);

/// Joins `outputs` along dim 0 on `device` (torch's gather): (B_0, ...), (B_1, ...) ->
/// (B_0 + B_1 + ..., ...). Scalar outputs, such as a loss per replica, become a vector with one
/// value per replica.
Tensor gather(const std::vector<Tensor>& outputs, Device device);

}  // namespace lockstep
