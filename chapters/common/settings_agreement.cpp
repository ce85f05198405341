#include "common/settings_agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "distributed/agreed_error.h"
#include "distributed/collective_caller.h"
#include "distributed/rank_agreement.h"
#include "tensor/tensor.h"
#include "util/fnv1a.h"

namespace lockstep {

namespace {

// Each rank's value of the setting that differs travels as this many bytes: enough for every
// value the chapters have (a number, a model or dataset name, a path's ending).
constexpr int64_t kValueBytes = 48;

// The last kValueBytes - 1 characters of `value` (a path is told apart by its end), padded with
// zeros.
std::vector<uint8_t> value_bytes(const std::string& value) {
  std::vector<uint8_t> bytes(kValueBytes, 0);
  const size_t keep = std::min<size_t>(value.size(), kValueBytes - 1);
  std::memcpy(bytes.data(), value.data() + value.size() - keep, keep);
  return bytes;
}

}  // namespace

void check_ranks_agree(ProcessGroup& group, Device device, const std::vector<SharedSetting>& settings) {
  const CollectiveCaller caller("settings agreement");
  // One number per setting, its hash: one all-gather finds the first that differs.
  std::vector<uint64_t> hashes;
  for (const SharedSetting& s : settings) hashes.push_back(fnv1a(s.value.data(), s.value.size()));
  const std::optional<Disagreement> differ = find_disagreement(group, hashes, device);
  // Every rank's text of that setting, so that the message can show each value.
  const SharedSetting& setting = settings[differ ? differ->item : 0];
  const std::vector<uint8_t> mine = value_bytes(setting.value);
  const Tensor local = from_vector(mine, {kValueBytes}, TensorOptions().dtype(DType::u8));
  const Tensor all = empty({group.size() * kValueBytes}, TensorOptions().dtype(DType::u8).device(device));
  group.all_gather(all, local.to(device));
  if (!differ) return;
  const Tensor table = all.to(Device::cpu());  // table: (world, kValueBytes)
  const auto* text = static_cast<const char*>(table.data());
  std::string values;
  for (int r = 0; r < group.size(); ++r) {
    values += (r ? ", rank " : "rank ") + std::to_string(r) + " has " + std::string(text + r * kValueBytes);
  }
  // Every rank holds the same table, so every rank stops here with the same sentence.
  throw AgreedError(detail::concat("the ranks were given different ", setting.flag, ": ", values,
                                   "; every rank must be started with the same value"));
}

}  // namespace lockstep
