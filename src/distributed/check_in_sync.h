/// \file
/// "Are my ranks in sync?": one checksum per parameter and buffer, compared across ranks. After
/// any number of DDP steps every rank's model must be bitwise identical; if it is not, this
/// names the first tensor that differs and the ranks that disagree with rank 0.
#pragma once

#include <cstdint>
#include <string>

#include "distributed/process_group.h"
#include "nn/module.h"

namespace lockstep {

/// The outcome of check_in_sync: `in_sync` and `difference` are the same on every rank.
struct InSyncReport {
  bool in_sync = true;      ///< every rank has the same bytes in every parameter and buffer
  uint64_t checksum = 0;    ///< this rank's whole state in one number (equal on all ranks when in sync)
  std::string difference;   ///< when not in sync: which tensor differs on which ranks
};

/// Computes an FNV-1a checksum of each of `module`'s parameters and buffers (state_dict order),
/// all-gathers them through `group` and compares. Collective: every rank calls it.
InSyncReport check_in_sync(const Module& module, ProcessGroup& group);

}  // namespace lockstep
