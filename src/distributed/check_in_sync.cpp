#include "distributed/check_in_sync.h"

#include <optional>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/rank_agreement.h"
#include "util/fnv1a.h"

namespace lockstep {

InSyncReport check_in_sync(const Module& module, ProcessGroup& group) {
  const StateDict state = module.state_dict();
  const std::vector<Tensor> params = module.parameters();
  const Device device = params.empty() ? Device::cpu() : params.front().device();
  const CollectiveCaller caller("check_in_sync");
  // First the number of tensors (different models cannot be compared tensor by tensor).
  InSyncReport report;
  if (const auto count = find_disagreement(group, {static_cast<uint64_t>(state.size())}, device)) {
    report.in_sync = false;
    report.difference = detail::concat("rank 0 has ", count->values[0], " parameters and buffers, rank(s) ",
                                       rank_list(count->ranks), " a different number");
    return report;
  }
  std::vector<uint64_t> checksums;
  for (const auto& [name, tensor] : state) checksums.push_back(tensor_checksum(tensor));
  // This rank's checksums combined into one number: what the chapter prints each epoch.
  report.checksum = fnv1a(checksums.data(), checksums.size() * sizeof(uint64_t));
  if (const auto differ = find_disagreement(group, checksums, device)) {
    report.in_sync = false;
    report.difference = detail::concat("\"", state[differ->item].first, "\" differs between rank 0 and rank(s) ",
                                       rank_list(differ->ranks));
  }
  return report;
}

}  // namespace lockstep
