/// \file
/// Do the ranks agree? Each rank describes a list of items (parameters, buffers) by one 64-bit
/// number each, a checksum or a shape fingerprint, usually an FNV-1a hash (util/fnv1a.h, included
/// here for the callers that make their numbers with it); one all_gather shows every rank every
/// rank's numbers, so all ranks find the same first item that differs, and can name it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "distributed/process_group.h"
#include "tensor/tensor.h"
#include "util/fnv1a.h"

namespace lockstep {

/// The FNV-1a hash of a tensor's bytes (copied to the CPU first if needed) and of its shape
/// and dtype.
uint64_t tensor_checksum(const Tensor& tensor);

/// The first item on which ranks disagree, as every rank sees it.
struct Disagreement {
  size_t item = 0;                   ///< its index in the list
  std::vector<int> ranks;            ///< the ranks whose value differs from rank 0's
  std::vector<uint64_t> values;      ///< every rank's value for it, by rank
};

/// All-gathers `values` (the same number of them on every rank) through `group`, as tensors on
/// `device`, and returns the first item whose value is not the same on every rank, or nothing
/// if they all agree. Collective: every rank calls it.
std::optional<Disagreement> find_disagreement(ProcessGroup& group, const std::vector<uint64_t>& values, Device device);

/// "1, 3" for ranks {1, 3}.
std::string rank_list(const std::vector<int>& ranks);

}  // namespace lockstep
