/// \file
/// One trace file for the whole job: every rank's spans (util/trace.h), gathered to rank 0,
/// each rank drawn as a process of its own ("rank 0", "rank 1", ...) on one time axis, so
/// that Perfetto shows the ranks one above the other, step by step.
#pragma once

#include <cstdint>
#include <string>

#include "distributed/process_group.h"

namespace lockstep {

/// Stops recording (disable_trace()), gathers the spans every rank recorded through `group` (a
/// group that sends CPU tensors: cpu_process_group()) and writes them on rank 0 to `path` as one
/// Chrome trace. Time zero is
/// the earliest enable_trace() of any rank; the steady clock is per machine, so ranks on
/// different machines are aligned only to within the clocks' offset. Collective: every rank
/// calls it. Returns the number of spans written (on every rank).
int64_t export_chrome_trace(const std::string& path, ProcessGroup& group);

}  // namespace lockstep
