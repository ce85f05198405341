#include "distributed/collective_caller.h"

#include <utility>

namespace lockstep {

namespace {
// Each thread names its own collectives: DataParallel's replicas and DDP's hooks may start them
// on threads other than main.
std::string& current_name() {
  thread_local std::string name = "user code";
  return name;
}
}  // namespace

CollectiveCaller::CollectiveCaller(std::string name) : previous_(std::move(current_name())) {
  current_name() = std::move(name);
}

CollectiveCaller::~CollectiveCaller() { current_name() = std::move(previous_); }

const std::string& CollectiveCaller::current() { return current_name(); }

}  // namespace lockstep
