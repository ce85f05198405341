#include "distributed/zero_redundancy_optimizer.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "core/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/zero_grad.h"
#include "tensor/ops/cat.h"
#include "util/trace.h"

namespace lockstep {
namespace {

// "state.<index>.<name>" -> (index, name); false for another form.
bool split_state_key(const std::string& key, size_t& index, std::string& name) {
  const std::string prefix = "state.";
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  const std::string digits = key.substr(prefix.size(), dot - prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  index = std::stoull(digits);
  name = key.substr(dot + 1);
  return true;
}

// One rank's optimiser state as bytes, to travel in a broadcast: per entry the key, the dtype,
// the shape and the elements (state tensors are small in number, so a plain layout will do).
void append(std::vector<uint8_t>& out, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  out.insert(out.end(), bytes, bytes + size);
}

std::vector<uint8_t> pack_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<uint8_t> out;
  for (const auto& [key, tensor] : state) {
    const Tensor cpu = tensor.to(Device::cpu()).contiguous();
    const uint64_t key_size = key.size();
    const auto dtype = static_cast<uint8_t>(cpu.dtype());
    const uint64_t dims = cpu.dim();
    const uint64_t nbytes = static_cast<uint64_t>(cpu.nbytes());
    append(out, &key_size, sizeof key_size);
    append(out, key.data(), key.size());
    append(out, &dtype, sizeof dtype);
    append(out, &dims, sizeof dims);
    for (int64_t size : cpu.shape()) append(out, &size, sizeof size);
    append(out, &nbytes, sizeof nbytes);
    append(out, cpu.data(), nbytes);
  }
  return out;
}

// The reverse of pack_state; the bytes come from a rank of the same program, so a short read
// is a bug rather than bad input, and is reported as one.
std::vector<std::pair<std::string, Tensor>> unpack_state(const std::vector<uint8_t>& bytes) {
  std::vector<std::pair<std::string, Tensor>> state;
  size_t at = 0;
  auto take = [&](void* into, size_t size) {
    LOCKSTEP_CHECK(at + size <= bytes.size(), "ZeroRedundancyOptimizer: a rank's optimizer state arrived cut short (",
                   bytes.size(), " bytes)");
    std::memcpy(into, bytes.data() + at, size);
    at += size;
  };
  while (at < bytes.size()) {
    uint64_t key_size = 0, dims = 0, nbytes = 0;
    uint8_t dtype = 0;
    take(&key_size, sizeof key_size);
    std::string key(key_size, '\0');
    take(key.data(), key_size);
    take(&dtype, sizeof dtype);
    take(&dims, sizeof dims);
    Shape shape(dims);
    for (auto& size : shape) take(&size, sizeof size);
    take(&nbytes, sizeof nbytes);
    Tensor tensor = empty(shape, TensorOptions().dtype(static_cast<DType>(dtype)));
    LOCKSTEP_CHECK(static_cast<uint64_t>(tensor.nbytes()) == nbytes, "ZeroRedundancyOptimizer: state '", key,
                   "' arrived with ", nbytes, " bytes for ", tensor.nbytes());
    take(tensor.data(), nbytes);
    state.emplace_back(std::move(key), std::move(tensor));
  }
  return state;
}

// Rank `root`'s bytes on every rank: their count first, then the bytes (two broadcasts).
std::vector<uint8_t> broadcast_bytes(ProcessGroup& group, std::vector<uint8_t> bytes, int root) {
  const Tensor count = from_vector(std::vector<int64_t>{static_cast<int64_t>(bytes.size())}, {1});
  group.broadcast(count, root);
  const int64_t size = count.to_vector<int64_t>()[0];
  const Tensor buffer = empty({size}, TensorOptions().dtype(DType::u8));
  if (group.rank() == root && size > 0) std::memcpy(buffer.data(), bytes.data(), static_cast<size_t>(size));
  if (size > 0) group.broadcast(buffer, root);
  bytes.resize(static_cast<size_t>(size));
  if (size > 0) std::memcpy(bytes.data(), buffer.data(), static_cast<size_t>(size));
  return bytes;
}

}  // namespace

std::vector<int> partition_parameters(const std::vector<int64_t>& numels, int world_size) {
  LOCKSTEP_CHECK(world_size >= 1, "partition_parameters: expected a world size of 1 or more, got ", world_size);
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first; equal sizes keep their order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<int64_t> held(static_cast<size_t>(world_size), 0);
  std::vector<int> owner(numels.size(), 0);
  for (size_t i : order) {
    // The rank holding the fewest elements so far; min_element takes the lowest of equals.
    const auto lightest = std::min_element(held.begin(), held.end());
    owner[i] = static_cast<int>(lightest - held.begin());
    *lightest += numels[i];
  }
  return owner;
}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Tensor> params, ProcessGroup& group,
                                                 const OptimizerFactory& make_optimizer)
    : group_(group), params_(std::move(params)) {
  LOCKSTEP_CHECK(!params_.empty(), "ZeroRedundancyOptimizer: got an empty parameter list (pass model.parameters())");
  std::vector<int64_t> numels;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    LOCKSTEP_CHECK(p.defined(), "ZeroRedundancyOptimizer: parameter ", i, " is an undefined tensor");
    LOCKSTEP_CHECK(p.dtype() == params_[0].dtype() && p.device() == params_[0].device(),
                   "ZeroRedundancyOptimizer: parameter ", i, " is ", dtype_name(p.dtype()), " on ", p.device(),
                   " but parameter 0 is ", dtype_name(params_[0].dtype()), " on ", params_[0].device(),
                   "; every parameter must share one dtype and device (each rank's partition travels as one buffer)");
    numels.push_back(p.numel());
  }
  owner_ = partition_parameters(numels, group_.size());
  partitions_.resize(static_cast<size_t>(group_.size()));
  for (size_t i = 0; i < params_.size(); ++i) partitions_[static_cast<size_t>(owner_[i])].push_back(i);

  // A rank without parameters would have no optimiser to step or to schedule: refuse, on every
  // rank alike (the partition is the same everywhere), rather than leave one rank out.
  for (int rank = 0; rank < group_.size(); ++rank) {
    LOCKSTEP_CHECK(!partitions_[static_cast<size_t>(rank)].empty(), "ZeroRedundancyOptimizer: rank ", rank, " of ",
                   group_.size(), " would own no parameter (the model has ", params_.size(), "); run with at most ",
                   params_.size(), " ranks");
  }
  std::vector<Tensor> mine;
  for (size_t i : partition(group_.rank())) mine.push_back(params_[i]);
  optimizer_ = make_optimizer(std::move(mine));
  LOCKSTEP_CHECK(optimizer_ != nullptr, "ZeroRedundancyOptimizer: the optimizer factory returned no optimizer");
}

//! [step]
void ZeroRedundancyOptimizer::step() {
  const RecordFunction span("ZeroRedundancyOptimizer.step", "optim");
  // This rank's partition: the only parameters whose state it keeps.
  optimizer_->step();
  consolidated_on_ = -1;

  // Then every rank's updated partition to every rank: one flat buffer per rank, broadcast
  // from its owner and copied back into the parameters it holds.
  NoGradGuard no_grad;
  const MemoryCategoryGuard category(MemoryCategory::communication_buffers);
  for (int rank = 0; rank < group_.size(); ++rank) {
    std::vector<Tensor> flat_pieces;
    const std::vector<size_t>& owned = partition(rank);
    for (size_t i : owned) flat_pieces.push_back(params_[i].reshape({params_[i].numel()}));
    const Tensor flat = cat(flat_pieces, 0);
    group_.broadcast(flat, rank);
    if (rank == group_.rank()) continue;
    int64_t offset = 0;
    for (size_t i : owned) {
      const int64_t n = params_[i].numel();
      params_[i].copy_(flat.slice(0, offset, offset + n).reshape(params_[i].shape()));
      offset += n;
    }
  }
}
//! [step]

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) { lockstep::zero_grad(params_, set_to_none); }

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  LOCKSTEP_CHECK(to >= 0 && to < group_.size(), "ZeroRedundancyOptimizer::consolidate_state_dict: rank ", to,
                 " is not a rank of this group of ", group_.size());
  const OptimizerStateDict mine = optimizer_->state_dict();
  consolidated_ = OptimizerStateDict();
  consolidated_.optimizer = mine.optimizer;
  consolidated_.param_group = mine.param_group;
  consolidated_.num_params = static_cast<int64_t>(params_.size());
  // Each rank's state in turn, renumbered from its optimiser's indices to params()'.
  for (int rank = 0; rank < group_.size(); ++rank) {
    const std::vector<uint8_t> bytes =
        broadcast_bytes(group_, rank == group_.rank() ? pack_state(mine.state) : std::vector<uint8_t>{}, rank);
    if (group_.rank() != to) continue;
    const std::vector<size_t>& owned = partition(rank);
    for (auto& [key, tensor] : unpack_state(bytes)) {
      size_t local = 0;
      std::string name;
      LOCKSTEP_CHECK(split_state_key(key, local, name) && local < owned.size(),
                     "ZeroRedundancyOptimizer: rank ", rank, " sent state '", key, "', which names none of its ",
                     owned.size(), " parameters");
      consolidated_.state.emplace_back(optimizer_state_key(owned[local], name), std::move(tensor));
    }
  }
  // The order a plain optimiser's state_dict has: by parameter, then by name as each rank sent.
  std::stable_sort(consolidated_.state.begin(), consolidated_.state.end(), [](const auto& a, const auto& b) {
    size_t ia = 0, ib = 0;
    std::string na, nb;
    split_state_key(a.first, ia, na);
    split_state_key(b.first, ib, nb);
    return ia < ib;
  });
  consolidated_on_ = to;
  if (group_.rank() != to) consolidated_ = OptimizerStateDict();
}

OptimizerStateDict ZeroRedundancyOptimizer::state_dict() const {
  LOCKSTEP_CHECK(consolidated_on_ >= 0,
                 "ZeroRedundancyOptimizer::state_dict: each rank holds only its partition's state; call "
                 "consolidate_state_dict(to) on every rank first (after the last step()), then state_dict() on rank to");
  LOCKSTEP_CHECK(consolidated_on_ == group_.rank(), "ZeroRedundancyOptimizer::state_dict: the state was consolidated on rank ",
                 consolidated_on_, ", not on this rank ", group_.rank(), "; call state_dict() there");
  return consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const OptimizerStateDict& state) {
  LOCKSTEP_CHECK(state.num_params == static_cast<int64_t>(params_.size()), "ZeroRedundancyOptimizer::load_state_dict: ",
                 "the state is of ", state.num_params, " parameters, this optimizer has ", params_.size());
  // Keep the entries of this rank's parameters, renumbered to its optimiser's indices.
  std::vector<size_t> global_to_local(params_.size(), SIZE_MAX);
  const std::vector<size_t>& local_to_global = partition(group_.rank());
  for (size_t j = 0; j < local_to_global.size(); ++j) global_to_local[local_to_global[j]] = j;
  OptimizerStateDict mine;
  mine.optimizer = state.optimizer;
  mine.param_group = state.param_group;
  mine.num_params = static_cast<int64_t>(local_to_global.size());
  for (const auto& [key, tensor] : state.state) {
    size_t index = 0;
    std::string name;
    LOCKSTEP_CHECK(split_state_key(key, index, name) && index < params_.size(),
                   "ZeroRedundancyOptimizer::load_state_dict: state '", key, "' names no parameter of ", params_.size());
    if (global_to_local[index] == SIZE_MAX) continue;
    mine.state.emplace_back(optimizer_state_key(global_to_local[index], name), tensor);
  }
  optimizer_->load_state_dict(mine);
  consolidated_on_ = -1;
}

}  // namespace lockstep
