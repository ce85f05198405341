/// \file
/// Printing from the ranks of a job: every rank runs the same program, so a line says which
/// rank printed it, or only rank 0 prints what every rank knows equally.
#pragma once

#include <string>

namespace lockstep {

/// "[rank R/W] ": the prefix of every line a rank prints, so interleaved output can be told
/// apart. Empty before init_process_group.
std::string rank_prefix();

/// Prints `line` (and a newline) on stdout with this rank's prefix, in one write.
void log_rank(const std::string& line);

/// Prints `line` (and a newline) on stdout on rank 0 only, without a prefix: for what every rank
/// knows equally (the configuration, all-reduced results).
void print_rank0(const std::string& line);

}  // namespace lockstep
