#include "distributed/rank_agreement.h"

#include <cstring>

#include "util/fnv1a.h"

namespace lockstep {

uint64_t tensor_checksum(const Tensor& tensor) {
  const Tensor host = tensor.detach().to(Device::cpu()).contiguous();
  uint64_t hash = fnv1a(host.shape().data(), host.shape().size() * sizeof(int64_t));
  const int dtype = static_cast<int>(host.dtype());
  hash = fnv1a(&dtype, sizeof(dtype), hash);
  return fnv1a(host.data(), static_cast<size_t>(host.numel()) * element_size(host.dtype()), hash);
}

std::optional<Disagreement> find_disagreement(ProcessGroup& group, const std::vector<uint64_t>& values, Device device) {
  // The values travel as i64 tensors: the same 64 bits, reinterpreted.
  const int64_t n = static_cast<int64_t>(values.size());
  const int world = group.size();
  Tensor mine = empty({n}, TensorOptions().dtype(DType::i64));
  if (n > 0) std::memcpy(mine.data(), values.data(), values.size() * sizeof(uint64_t));
  const Tensor all = empty({world * n}, TensorOptions().dtype(DType::i64).device(device));
  group.all_gather(all, mine.to(device));
  const Tensor gathered = all.to(Device::cpu());
  const auto* table = static_cast<const uint64_t*>(gathered.data());  // table: (world, n)
  // The first item on which some rank differs from rank 0.
  for (int64_t item = 0; item < n; ++item) {
    Disagreement d;
    d.item = static_cast<size_t>(item);
    for (int r = 0; r < world; ++r) {
      d.values.push_back(table[r * n + item]);
      if (table[r * n + item] != table[item]) d.ranks.push_back(r);
    }
    if (!d.ranks.empty()) return d;
  }
  return std::nullopt;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace lockstep
