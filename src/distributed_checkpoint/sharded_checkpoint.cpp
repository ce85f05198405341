#include "distributed_checkpoint/sharded_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/flat_shard.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "tensor/autograd/grad_mode.h"

namespace lockstep {

namespace {

constexpr const char* kFormat = "lockstep-sharded-checkpoint";
constexpr const char* kVersion = "1";

std::string shard_file(const std::string& dir, int rank, int world) {
  return dir + "/shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".safetensors";
}

std::string index_file(const std::string& dir) { return dir + "/index.safetensors"; }

// Writes `tensors` with `metadata` and its checksum (io/checkpoint.h's, which the reader checks).
void write_with_checksum(const std::string& path, const StateDict& tensors, std::map<std::string, std::string> metadata) {
  metadata["checksum"] = checkpoint_checksum(tensors, metadata);
  save_safetensors(path, tensors, metadata);
}

// A file of the checkpoint, read and checked: its own checksum, the format, and (for a shard)
// the save it belongs to.
struct CheckedFile {
  StateDict tensors;
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> by_name;
};

CheckedFile read_checked(const std::string& context, const std::string& path, const std::string& what) {
  std::error_code error;
  LOCKSTEP_CHECK(std::filesystem::exists(path, error), context, what, " ", path, " is missing");
  CheckedFile file;
  file.tensors = load_safetensors(path, &file.metadata);
  const auto found = file.metadata.find("checksum");
  LOCKSTEP_CHECK(file.metadata["format"] == kFormat, context, path, " is not a file of a Lockstep sharded checkpoint");
  LOCKSTEP_CHECK(file.metadata["version"] == kVersion, context, path, " has format version '",
                 file.metadata["version"], "'; this Lockstep reads version ", kVersion);
  std::map<std::string, std::string> rest = file.metadata;
  rest.erase("checksum");
  LOCKSTEP_CHECK(found != file.metadata.end() && found->second == checkpoint_checksum(file.tensors, rest), context, path,
                 " does not match its checksum: it was changed or damaged after it was written");
  for (const auto& [name, tensor] : file.tensors) file.by_name[name] = tensor;
  return file;
}

// A whole number of the metadata.
int64_t number(const std::string& context, const CheckedFile& file, const std::string& key) {
  const auto found = file.metadata.find(key);
  LOCKSTEP_CHECK(found != file.metadata.end(), context, "the index has no \"", key, "\"; it is damaged");
  size_t used = 0;
  int64_t value = -1;
  try {
    value = std::stoll(found->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LOCKSTEP_CHECK(used == found->second.size() && value >= 0, context, "the index's \"", key, "\" is '", found->second,
                 "', not a whole number of 0 or more; it is damaged");
  return value;
}

// This rank's new shard, (R_new, inner), of a tensor saved as shards of R_old rows over the
// old ranks: the rows [first, first + count) it needs, taken from every old shard that holds
// some. `piece(k)` is old rank k's shard, (R_old, inner).
template <class Piece>
Tensor reshard(int64_t rows, int64_t inner, int old_world, int new_world, int rank, const Piece& piece) {
  const int64_t old_rows = shard_numel(rows, old_world), new_rows = shard_numel(rows, new_world);
  const Tensor out = zeros({new_rows, inner});
  const int64_t first = std::min(rows, rank * new_rows), last = std::min(rows, first + new_rows);
  for (int64_t row = first; row < last;) {
    const int k = static_cast<int>(row / old_rows);
    const int64_t until = std::min(last, (k + 1) * old_rows);
    out.slice(0, row - first, until - first).copy_(piece(k).slice(0, row - k * old_rows, until - k * old_rows));
    row = until;
  }
  return out;
}

}  // namespace

void save_sharded_checkpoint(const std::string& dir, FSDPModule& root, const Optimizer& optimizer,
                             const ShardedTrainingPosition& position, ProcessGroup& group) {
  const std::string context = "save_sharded_checkpoint: '" + dir + "': ";
  const std::vector<std::pair<std::string, Tensor>> shards = root.named_parameters();
  LOCKSTEP_CHECK(!shards.empty(), context, "the model has no parameters to save");
  const Device device = shards.front().second.device();
  // Rank 0 makes the folder and draws the save's id; the broadcast tells every rank both are done.
  uint64_t id = 0;
  if (group.rank() == 0) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    LOCKSTEP_CHECK(std::filesystem::is_directory(dir), context, "cannot make the folder: ",
                   error ? error.message() : "a file of that name is in the way");
    std::random_device random;
    id = (static_cast<uint64_t>(random()) << 32) ^ random();
  }
  const Tensor id_tensor = from_vector(std::vector<int64_t>{static_cast<int64_t>(id)}, {1}, TensorOptions().device(device));
  {
    const CollectiveCaller caller("sharded checkpoint: save id");
    group.broadcast(id_tensor, 0);
  }
  const std::string save_id = std::to_string(static_cast<uint64_t>(id_tensor.to(Device::cpu()).item<int64_t>()));

  // This rank's file: its shards of the parameters and of the optimiser's state.
  StateDict tensors;
  for (const auto& [name, shard] : shards) tensors.emplace_back("model." + name, shard.detach().to(Device::cpu()));
  const OptimizerStateDict state = optimizer.state_dict();
  for (const auto& [key, tensor] : state.state) tensors.emplace_back("optimizer." + key, tensor.to(Device::cpu()));
  if (group.rank() == 0) {
    // The buffers (BatchNorm's statistics), whole on every rank: rank 0's.
    std::map<const Storage*, bool> is_parameter;
    for (const Tensor& p : root.module().parameters()) is_parameter[p.storage().get()] = true;
    for (const auto& [name, tensor] : root.module().state_dict()) {
      if (!is_parameter.count(tensor.storage().get())) tensors.emplace_back("buffer." + name, tensor.to(Device::cpu()));
    }
  }
  const std::map<std::string, std::string> common = {{"format", kFormat}, {"version", kVersion}, {"save_id", save_id},
                                                     {"world_size", std::to_string(group.size())}};
  std::map<std::string, std::string> metadata = common;
  metadata["rank"] = std::to_string(group.rank());
  write_with_checksum(shard_file(dir, group.rank(), group.size()), tensors, metadata);
  {
    const CollectiveCaller caller("sharded checkpoint: every shard written");
    group.barrier();
  }
  // The index last: a folder whose index names this save holds all of it.
  if (group.rank() == 0) {
    StateDict shapes;
    for (const auto& [name, whole] : root.module().named_parameters()) {
      shapes.emplace_back("shape." + name, from_vector(std::vector<int64_t>(whole.shape().begin(), whole.shape().end()),
                                                       {static_cast<int64_t>(whole.dim())}));
    }
    metadata = common;
    metadata["epoch"] = std::to_string(position.epoch);
    metadata["step_in_epoch"] = std::to_string(position.step_in_epoch);
    metadata["global_step"] = std::to_string(position.global_step);
    metadata["batch_size"] = std::to_string(position.batch_size);
    metadata["sampler_seed"] = std::to_string(position.sampler_seed);
    metadata["optimizer"] = optimizer_settings_json(state);
    write_with_checksum(index_file(dir), shapes, metadata);
  }
  const CollectiveCaller caller("sharded checkpoint: index written");
  group.barrier();
}

ShardedResumeInfo load_sharded_checkpoint(const std::string& dir, FSDPModule& root, Optimizer& optimizer,
                                          ProcessGroup& group) {
  const std::string context = "load_sharded_checkpoint: '" + dir + "': ";
  std::error_code error;
  LOCKSTEP_CHECK(std::filesystem::is_directory(dir, error), context,
                 "not a folder; a sharded checkpoint is a folder of shard files and an index");
  LOCKSTEP_CHECK(std::filesystem::exists(index_file(dir), error), context,
                 "has no index.safetensors: not a sharded checkpoint, or its save never finished (the index is "
                 "written last)");
  const CheckedFile index = read_checked(context, index_file(dir), "the index");
  const int old_world = static_cast<int>(number(context, index, "world_size"));
  LOCKSTEP_CHECK(old_world >= 1, context, "the index says it was saved by 0 ranks; it is damaged");
  const std::string save_id = index.metadata.at("save_id");

  // Another model is refused before any shard is read: the first name or shape that differs.
  const std::vector<std::pair<std::string, Tensor>> wholes = root.module().named_parameters();
  for (const auto& [name, whole] : wholes) {
    const auto found = index.by_name.find("shape." + name);
    LOCKSTEP_CHECK(found != index.by_name.end(), context, "the checkpoint is of another model: it has no parameter \"",
                   name, "\"");
    const std::vector<int64_t> saved = found->second.to_vector<int64_t>();
    LOCKSTEP_CHECK(Shape(saved.begin(), saved.end()) == whole.shape(), context, "the checkpoint is of another model: \"",
                   name, "\" is ", shape_str(Shape(saved.begin(), saved.end())), " there but ", shape_str(whole.shape()),
                   " here");
  }
  LOCKSTEP_CHECK(index.by_name.size() == wholes.size(), context, "the checkpoint is of another model: it has ",
                 index.by_name.size(), " parameters, this model ", wholes.size());

  // Every shard must be there, whichever this rank reads: then every rank says so together.
  for (int k = 0; k < old_world; ++k) {
    LOCKSTEP_CHECK(std::filesystem::exists(shard_file(dir, k, old_world), error), context, shard_file(dir, k, old_world),
                   " is missing: a checkpoint saved by ", old_world, " ranks needs all ", old_world, " shard files");
  }
  // The old shards, each read once, when first needed, and checked to belong to this save.
  std::map<int, CheckedFile> files;
  const auto file = [&](int k) -> const CheckedFile& {
    auto found = files.find(k);
    if (found != files.end()) return found->second;
    const std::string path = shard_file(dir, k, old_world);
    CheckedFile shard = read_checked(context, path, "the shard of rank " + std::to_string(k) + ",");
    LOCKSTEP_CHECK(shard.metadata["save_id"] == save_id, context, path, " belongs to another save (id ",
                   shard.metadata["save_id"], "; the index's is ", save_id,
                   "): the files of two saves were mixed, or a save stopped part-way");
    LOCKSTEP_CHECK(shard.metadata["rank"] == std::to_string(k) && shard.metadata["world_size"] == std::to_string(old_world),
                   context, path, " says it is rank ", shard.metadata["rank"], " of ", shard.metadata["world_size"],
                   ", not rank ", k, " of ", old_world, "; it was renamed");
    return files.emplace(k, std::move(shard)).first->second;
  };
  const auto saved_tensor = [&](int k, const std::string& key) -> const Tensor& {
    const CheckedFile& shard = file(k);
    const auto found = shard.by_name.find(key);
    LOCKSTEP_CHECK(found != shard.by_name.end(), context, shard_file(dir, k, old_world), " has no \"", key,
                   "\"; it is damaged");
    return found->second;
  };

  // Every tensor of this rank, resharded, before anything is changed.
  const NoGradGuard no_grad;
  const int rank = group.rank(), world = group.size();
  const std::vector<std::pair<std::string, Tensor>> shards = root.named_parameters();
  std::vector<Tensor> new_shards;
  OptimizerStateDict state = parse_optimizer_settings_json(index.metadata.at("optimizer"), context + "the index: ");
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto& [name, whole] = wholes[i];
    const int64_t rows = whole.dim() == 0 ? 1 : whole.size(0), inner = whole.numel() / rows;
    const int64_t old_rows = shard_numel(rows, old_world);
    const auto take = [&](const std::string& key) {
      return reshard(rows, inner, old_world, world, rank,
                     [&](int k) { return saved_tensor(k, key).reshape({old_rows, inner}); });
    };
    new_shards.push_back(take("model." + name).view(shards[i].second.shape()));
    // The optimiser's state of this parameter: per element as the parameter, or one number.
    for (const auto& [key, tensor] : file(0).tensors) {
      const std::string prefix = "optimizer." + optimizer_state_key(i, "");
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string state_key = key.substr(std::string("optimizer.").size());
      if (tensor.dim() == 0) {
        state.state.emplace_back(state_key, tensor);
      } else {
        state.state.emplace_back(state_key, take(key).view(shards[i].second.shape()));
      }
    }
  }
  // The optimiser checks the state against its parameters before it takes any of it.
  optimizer.load_state_dict(state);
  for (size_t i = 0; i < shards.size(); ++i) shards[i].second.copy_(new_shards[i].to(shards[i].second.device()));
  for (const auto& [name, tensor] : root.module().state_dict()) {
    const auto found = file(0).by_name.find("buffer." + name);
    if (found != file(0).by_name.end()) tensor.copy_(found->second);
  }

  ShardedResumeInfo info;
  info.saved.epoch = number(context, index, "epoch");
  info.saved.step_in_epoch = number(context, index, "step_in_epoch");
  info.saved.global_step = number(context, index, "global_step");
  info.saved.batch_size = number(context, index, "batch_size");
  info.saved.sampler_seed = static_cast<uint64_t>(number(context, index, "sampler_seed"));
  info.saved_world_size = old_world;
  info.samples_in_epoch = info.saved.step_in_epoch * info.saved.batch_size * old_world;
  info.step_in_epoch = info.saved.batch_size > 0 ? info.samples_in_epoch / (info.saved.batch_size * world) : 0;
  if (old_world != world) {
    info.notes.push_back("saved by " + std::to_string(old_world) + " ranks, resumed by " + std::to_string(world) +
                         ": parameters and optimizer state resharded; the epoch resumes after its first " +
                         std::to_string(info.samples_in_epoch) + " samples");
  }
  return info;
}

}  // namespace lockstep
