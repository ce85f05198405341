/// \file
/// Ranks that agree: settings that every rank of a job must share (batch size, epochs, seed,
/// bucket caps, ...) are compared when the job starts. A rank started with another batch size or
/// step limit would run another number of collectives and leave the others waiting forever;
/// another seed would shard the data differently and train on overlapping samples without a
/// word; other bucket caps would pair all-reduces of different sizes.
#pragma once

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "distributed/process_group.h"

namespace lockstep {

/// One setting every rank must share: the flag that sets it and its value, as text.
struct SharedSetting {
  std::string flag;   ///< e.g. "--batch-size"
  std::string value;  ///< e.g. "64"
};

/// The SharedSetting of `flag` with `value` written out as text (a number with all the digits that
/// tell it from its neighbours, so that 0.05 and 0.050000001 differ).
template <class T>
SharedSetting shared(const std::string& flag, const T& value) {
  std::ostringstream text;
  text.precision(std::numeric_limits<double>::max_digits10);
  text << value;
  return {flag, text.str()};
}

/// Compares `settings` (the same list, in the same order, on every rank) across the ranks of
/// `group` and throws the same AgreedError on every rank (each leaves cleanly) when one differs, naming the first such
/// setting and each rank's value, e.g. "the ranks were given different --batch-size: rank 0 has
/// 64, rank 1 has 32; every rank must be started with the same value". Collective: two
/// all-gathers, whatever the outcome.
void check_ranks_agree(ProcessGroup& group, Device device, const std::vector<SharedSetting>& settings);

}  // namespace lockstep
