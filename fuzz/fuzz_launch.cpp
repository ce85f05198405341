// Fuzz target: the launch-environment parser (detect_launch; src/distributed/launch.h), which
// reads the variables of Open MPI, MPICH, torchrun and Slurm, Slurm's "2(x3),1" task lists
// among them.
//
// Feeds: the input as an environment, one NAME=VALUE per line (a line without '=' is ignored;
// a later line replaces an earlier one of the same name), given to detect_launch as its getenv.
// Asserts: no crash, no undefined behaviour, no hang, and no exception but lockstep::Error; a
// launch that parses names a known launcher, with 0 <= rank < world size, non-negative local
// rank and local world size, and with no launcher's variables at all, the world of one.
#include <map>
#include <string>

#include "core/error.h"
#include "distributed/launch.h"
#include "fuzz_input.h"

using lockstep::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> environment = lockstep::fuzz::key_value_lines(data, size);
  // getenv returns C strings: a value ends at its first zero byte, as in a real environment.
  for (auto& [name, value] : environment) value = value.c_str();
  const auto getenv = [&environment](const char* name) -> const char* {
    const auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  };

  lockstep::LaunchInfo info;
  try {
    info = lockstep::detect_launch(getenv);
  } catch (const lockstep::Error&) {
    return 0;  // a malformed value is the documented error
  }
  const std::string& l = info.launcher;
  require(l == "openmpi" || l == "mpich" || l == "torchrun" || l == "slurm" || l == "none",
          "the launcher is one detect_launch knows, not '" + l + "'");
  require(info.world_size >= 1 && info.rank >= 0 && info.rank < info.world_size, "the rank is a rank of the world");
  require(info.local_rank >= 0 && info.local_world_size >= 0, "local rank and local world size are not negative");
  if (l == "none")
    require(info.rank == 0 && info.world_size == 1 && info.local_rank == 0 && info.local_world_size == 1,
            "without a launcher, the world of one");
  return 0;
}
