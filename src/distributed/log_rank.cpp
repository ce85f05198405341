#include "distributed/log_rank.h"

#include <iostream>

#include "distributed/init_process_group.h"

namespace lockstep {

std::string rank_prefix() {
  if (!is_initialized()) return "";
  const ProcessGroup& group = default_process_group();
  return "[rank " + std::to_string(group.rank()) + "/" + std::to_string(group.size()) + "] ";
}

void log_rank(const std::string& line) {
  // One write of the whole line, so that lines of different ranks do not interleave mid-line.
  std::cout << (rank_prefix() + line + "\n") << std::flush;
}

void print_rank0(const std::string& line) {
  if (is_initialized() && default_process_group().rank() != 0) return;
  std::cout << line << "\n" << std::flush;
}

}  // namespace lockstep
