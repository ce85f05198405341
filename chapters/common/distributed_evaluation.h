/// \file
/// What chapters 4 and 5 report after each epoch: the test accuracy computed by all ranks
/// together, and the weights' checksum in hexadecimal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"
#include "data/dataset.h"
#include "distributed/process_group.h"
#include "nn/module.h"
#include "nn/state_dict.h"

namespace lockstep {

/// The test set's accuracy and loss over all ranks, and one rank's own share of them.
struct Evaluation {
  double accuracy = 0.0;        ///< All-reduced: the same on every rank.
  double loss = 0.0;            ///< All-reduced mean loss.
  double count = 0.0;           ///< Images counted over all ranks (padding included).
  double shard_accuracy = 0.0;  ///< This rank's shard alone: differs between ranks.
};

/// Evaluates `model` (in eval mode, without gradients) on `test_set`: each rank its own shard,
/// then the correct count, the image count and the loss sum are all-reduced over `group`. The
/// ops run in the caller's autocast region, if any.
Evaluation evaluate(Module& model, const std::shared_ptr<const Dataset>& test_set, ProcessGroup& group, Device device);

/// `value` as 16 hexadecimal digits, as the chapters print checksums.
std::string checksum_hex(uint64_t value);

/// One number for `model`'s weights: the FNV-1a of each parameter's tensor_checksum, in
/// `model.named_parameters()` order, each taken by name from `state` (the model's own
/// state_dict, or a sharded model's gathered full_state_dict). Buffers are left out: each rank's
/// BatchNorm statistics may be its own. The same weights give the same number on every rank and
/// in every way of sharding.
uint64_t weights_checksum(Module& model, const StateDict& state);

}  // namespace lockstep
