// Checkpoints: the training state as one safetensors file, tensors plus JSON metadata (see
// io/checkpoint.h for the layout and the rules). Saving builds the whole file in memory's terms
// first (names, metadata, checksum), then writes it atomically with save_safetensors; loading
// checks every part of the file against the objects before it changes any of them.
#include "io/checkpoint.h"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "util/fnv1a.h"

namespace lockstep {
namespace {

using Json = nlohmann::ordered_json;

const char* const kModelPrefix = "model.";
const char* const kOptimizerPrefix = "optimizer.";
const char* const kScalerPrefix = "scaler.";

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "load_checkpoint: '<path>': <problem>" as an Error.
template <class... Args>
[[noreturn]] void fail(const std::string& path, const Args&... problem) {
  throw Error(detail::concat("load_checkpoint: '", path, "': ", problem...));
}
template <class... Args>
void check(bool cond, const std::string& path, const Args&... problem) {
  if (!cond) fail(path, problem...);
}

// The "checksum" entry: "fnv1a64:" and 16 hex digits of FNV-1a over the tensors' bytes in
// order, which tells a damaged file (bit rot, a copy cut short at a tensor boundary, zeroed
// blocks after a crash) from a whole one.
std::string checksum(const StateDict& tensors) {
  uint64_t hash = kFnv1aOffsetBasis;
  for (const auto& entry : tensors) {
    const Tensor t = entry.second.contiguous();
    hash = fnv1a(t.data(), static_cast<size_t>(t.numel()) * element_size(t.dtype()), hash);
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, hash);
  return std::string("fnv1a64:") + text;
}

// A hyper-parameter as JSON, and back.
Json to_json(const HyperParameter& value) {
  if (std::holds_alternative<bool>(value)) return std::get<bool>(value);
  if (std::holds_alternative<double>(value)) return std::get<double>(value);
  return std::get<std::vector<double>>(value);
}
std::optional<HyperParameter> from_json(const Json& value) {
  if (value.is_boolean()) return HyperParameter(value.get<bool>());
  if (value.is_number()) return HyperParameter(value.get<double>());
  if (value.is_array()) {
    std::vector<double> numbers;
    for (const Json& item : value) {
      if (!item.is_number()) return std::nullopt;
      numbers.push_back(item.get<double>());
    }
    return HyperParameter(numbers);
  }
  return std::nullopt;
}

// The model's fingerprint: [name, dtype, shape] for every entry of its state_dict.
Json fingerprint(const StateDict& state) {
  Json out = Json::array();
  for (const auto& [name, t] : state) out.push_back(Json::array({name, dtype_name(t.dtype()), t.shape()}));
  return out;
}

// The calling thread's default generator's state.
std::string default_generator_state() {
  const auto lock = lock_default_generator(nullptr);
  return default_generator().get_state();
}

// The metadata value under `key`, parsed as JSON; a missing key or bad JSON is a damaged file.
Json metadata_json(const std::string& path, const std::map<std::string, std::string>& metadata,
                   const std::string& key) {
  const auto found = metadata.find(key);
  check(found != metadata.end(), path, "the checkpoint's metadata has no \"", key,
        "\" entry; the file is damaged or was not written by save_checkpoint");
  try {
    return Json::parse(found->second);
  } catch (const Json::parse_error& e) {
    fail(path, "the checkpoint's metadata \"", key, "\" is not valid JSON (", e.what(), "); the file is damaged");
  }
}

// `json[key]` as an integer, or a damaged-file error.
int64_t integer_in(const std::string& path, const Json& json, const char* where, const char* key) {
  check(json.is_object() && json.contains(key) && json[key].is_number_integer(), path, "the checkpoint's \"", where,
        "\" metadata has no whole number \"", key, "\"; the file is damaged");
  return json[key].get<int64_t>();
}

// The entries of `tensors` whose names start with `prefix`, the prefix removed.
StateDict with_prefix(const StateDict& tensors, const std::string& prefix) {
  StateDict out;
  for (const auto& [name, t] : tensors)
    if (starts_with(name, prefix)) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

// Compares the checkpoint's model fingerprint with the model's state_dict, and fails at the
// first difference with a sentence that names it.
void check_same_model(const std::string& path, const Json& saved, const StateDict& mine) {
  check(saved.is_array(), path, "the checkpoint's \"model\" metadata is not a list; the file is damaged");
  std::map<std::string, std::pair<std::string, Shape>> theirs;
  std::vector<std::string> order;
  for (const Json& entry : saved) {
    check(entry.is_array() && entry.size() == 3 && entry[0].is_string() && entry[1].is_string() &&
              entry[2].is_array(),
          path, "the checkpoint's \"model\" metadata has a malformed entry; the file is damaged");
    Shape shape;
    for (const Json& d : entry[2]) shape.push_back(d.get<int64_t>());
    theirs[entry[0].get<std::string>()] = {entry[1].get<std::string>(), shape};
    order.push_back(entry[0].get<std::string>());
  }
  // The most common mistake first: a state_dict saved from (or loaded into) a DDP wrapper.
  const bool saved_wrapped = !order.empty() && starts_with(order.front(), "module.");
  const bool mine_wrapped = !mine.empty() && starts_with(mine.front().first, "module.");
  check(saved_wrapped == mine_wrapped, path, saved_wrapped ? "the checkpoint's" : "this model's",
        " names start with \"module.\" (a DistributedDataParallel wrapper's state_dict) and ",
        saved_wrapped ? "this model's" : "the checkpoint's",
        " do not; save and load the inner module (ddp->module()) on both sides");
  for (const auto& [name, t] : mine) {
    const auto found = theirs.find(name);
    check(found != theirs.end(), path, "holds another model: this model has '", name,
          "' and the checkpoint does not (the checkpoint's model has ", order.size(), " entries, this one ",
          mine.size(), ")");
    check(found->second.second == t.shape(), path, "holds another model: its '", name, "' has shape ",
          shape_str(found->second.second), ", this model's has ", shape_str(t.shape()));
    check(found->second.first == dtype_name(t.dtype()), path, "its '", name, "' is ", found->second.first,
          ", this model's is ", dtype_name(t.dtype()), "; convert the model (model.to(dtype)) before loading");
  }
  for (const std::string& name : order) {
    bool present = false;
    for (const auto& entry : mine) present = present || entry.first == name;
    check(present, path, "holds another model: the checkpoint has '", name, "' and this model does not");
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainingState& state, int rank, int world_size) {
  LOCKSTEP_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "save_checkpoint: expected 0 <= rank < ",
                 "world_size, got rank ", rank, " of ", world_size);
  if (rank != 0) return;  // save_on_master: every rank holds the same state, rank 0 writes it
  LOCKSTEP_CHECK(state.model != nullptr, "save_checkpoint: TrainingState::model is null; pass the model to save");
  LOCKSTEP_CHECK(state.epoch >= 0 && state.step_in_epoch >= 0 && state.global_step >= 0 && state.batch_size >= 0,
                 "save_checkpoint: epoch, step_in_epoch, global_step and batch_size must be >= 0, got ", state.epoch,
                 ", ", state.step_in_epoch, ", ", state.global_step, " and ", state.batch_size);
  LOCKSTEP_CHECK(state.default_generator_states.empty() ||
                     state.default_generator_states.size() == static_cast<size_t>(world_size),
                 "save_checkpoint: default_generator_states holds ", state.default_generator_states.size(),
                 " states for ", world_size, " ranks; fill it with all_gather_generator_states(group) on every rank");

  // The tensors, on the CPU, under their prefixes.
  StateDict tensors;
  const auto add = [&tensors](const std::string& prefix, const StateDict& entries) {
    for (const auto& [name, t] : entries) tensors.emplace_back(prefix + name, t.detach().to(Device::cpu()));
  };
  const StateDict model_state = state.model->state_dict();
  add(kModelPrefix, model_state);

  std::map<std::string, std::string> metadata;
  metadata["format"] = kCheckpointFormat;
  metadata["format_version"] = std::to_string(kCheckpointFormatVersion);
  metadata["world_size"] = std::to_string(world_size);
  metadata["model"] = fingerprint(model_state).dump();

  Json training = Json::object();
  training["epoch"] = state.epoch;
  training["step_in_epoch"] = state.step_in_epoch;
  training["global_step"] = state.global_step;
  training["batch_size"] = state.batch_size;
  training["samples_in_epoch"] = state.step_in_epoch * state.batch_size * world_size;
  metadata["training"] = training.dump();

  Json optimizer = nullptr;
  if (state.optimizer != nullptr) {
    const OptimizerStateDict saved = state.optimizer->state_dict();
    add(kOptimizerPrefix, saved.state);
    optimizer = Json::object();
    optimizer["name"] = saved.optimizer;
    optimizer["num_params"] = saved.num_params;
    Json group = Json::object();
    for (const auto& [key, value] : saved.param_group) group[key] = to_json(value);
    optimizer["param_group"] = group;
  }
  metadata["optimizer"] = optimizer.dump();

  Json scaler = nullptr;
  if (state.scaler) {
    const StateDict saved = state.scaler->state_dict();  // empty when the scaler is disabled
    add(kScalerPrefix, saved);
    if (!saved.empty()) {
      scaler = Json::object();
      for (const auto& [name, t] : saved) {
        if (is_floating(t.dtype()))
          scaler[name] = t.item();
        else
          scaler[name] = static_cast<int64_t>(t.item());
      }
    }
  }
  metadata["scaler"] = scaler.dump();

  Json scheduler = nullptr;
  if (state.scheduler != nullptr) {
    const LRSchedulerStateDict saved = state.scheduler->state_dict();
    scheduler = Json::object();
    scheduler["name"] = saved.scheduler;
    scheduler["last_epoch"] = saved.last_epoch;
    scheduler["base_lr"] = saved.base_lr;
    for (const auto& [key, value] : saved.hyper_parameters) scheduler[key] = value;
  }
  metadata["scheduler"] = scheduler.dump();

  Json sampler = nullptr;
  if (state.sampler != nullptr) {
    sampler = Json::object();
    sampler["seed"] = state.sampler->seed();
    sampler["epoch"] = state.sampler->epoch();
    sampler["dataset_size"] = state.sampler->dataset_size();
    sampler["shuffle"] = state.sampler->shuffle();
    sampler["drop_last"] = state.sampler->drop_last();
  }
  metadata["sampler"] = sampler.dump();

  Json generators = Json::object();
  generators["default"] = state.default_generator_states.empty()
                              ? Json::array({default_generator_state()})
                              : Json(state.default_generator_states);
  Json named = Json::object();
  for (const auto& [name, generator] : state.generators) {
    LOCKSTEP_CHECK(generator != nullptr, "save_checkpoint: generator '", name, "' is null");
    LOCKSTEP_CHECK(!named.contains(name), "save_checkpoint: two generators are named '", name, "'");
    named[name] = generator->get_state();
  }
  generators["named"] = named;
  metadata["generators"] = generators.dump();
  metadata["checksum"] = checksum(tensors);

  save_safetensors(path, tensors, metadata);
}

ResumeInfo load_checkpoint(const std::string& path, TrainingState& state, Device map_location, int rank,
                           int world_size) {
  LOCKSTEP_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "load_checkpoint: expected 0 <= rank < ",
                 "world_size, got rank ", rank, " of ", world_size);
  LOCKSTEP_CHECK(state.model != nullptr, "load_checkpoint: TrainingState::model is null; pass the model to load into");
  // A temporary is what a save leaves when it is killed before the rename; nothing says it
  // reached the disk whole, so it is never loaded (the real file is the last complete save).
  if (ends_with(path, ".tmp"))
    fail(path, "is the temporary file of a save that did not finish (a completed save renames it to '",
         path.substr(0, path.size() - 4), "'); load that file instead, or rename this one if you know it is complete");

  // 1. The file: safetensors' own checks (truncation, bad header, bad offsets), then ours.
  std::map<std::string, std::string> metadata;
  StateDict tensors;
  try {
    tensors = load_safetensors(path, &metadata);
  } catch (const Error& e) {
    throw Error(detail::concat("load_checkpoint: ", e.what()));
  }
  const auto format = metadata.find("format");
  check(format != metadata.end() && format->second == kCheckpointFormat, path,
        "is a safetensors file but not a Lockstep checkpoint (its metadata has no \"format\": \"", kCheckpointFormat,
        "\"); for plain weights use load_safetensors and Module::load_state_dict");
  const auto version_text = metadata.find("format_version");
  int64_t version = 0;
  try {
    check(version_text != metadata.end(), path, "the checkpoint's metadata has no \"format_version\"");
    size_t used = 0;
    version = std::stoll(version_text->second, &used);
    check(used == version_text->second.size(), path, "bad");
  } catch (const std::exception&) {
    fail(path, "the checkpoint's \"format_version\" is not a whole number; the file is damaged");
  }
  check(version <= kCheckpointFormatVersion, path, "was written by a newer Lockstep (checkpoint format version ",
        version, "; this build reads up to version ", kCheckpointFormatVersion, "); update Lockstep to load it");
  check(version >= 1, path, "has checkpoint format version ", version, ", which no Lockstep writes");
  const auto saved_checksum = metadata.find("checksum");
  check(saved_checksum != metadata.end() && saved_checksum->second == checksum(tensors), path,
        "the data does not match the checksum saved with it: the file was damaged after it was written ",
        "(disk, copy or transfer); use an earlier checkpoint");

  const Json training = metadata_json(path, metadata, "training");
  const int64_t saved_world = [&] {
    const auto found = metadata.find("world_size");
    check(found != metadata.end(), path, "the checkpoint's metadata has no \"world_size\"; the file is damaged");
    try {
      return std::stoll(found->second);
    } catch (const std::exception&) {
      fail(path, "the checkpoint's \"world_size\" is not a whole number; the file is damaged");
    }
  }();
  check(saved_world >= 1, path, "the checkpoint's \"world_size\" is ", saved_world, "; the file is damaged");

  ResumeInfo info;
  info.epoch = integer_in(path, training, "training", "epoch");
  info.global_step = integer_in(path, training, "training", "global_step");
  info.saved_batch_size = integer_in(path, training, "training", "batch_size");
  info.samples_in_epoch = integer_in(path, training, "training", "samples_in_epoch");
  const int64_t saved_step_in_epoch = integer_in(path, training, "training", "step_in_epoch");
  info.saved_world_size = static_cast<int>(saved_world);
  info.step_in_epoch = saved_step_in_epoch;

  // 2. The model: the fingerprint, then the tensors under "model.".
  const StateDict model_state = state.model->state_dict();
  check_same_model(path, metadata_json(path, metadata, "model"), model_state);
  StateDict model_tensors = with_prefix(tensors, kModelPrefix);
  for (auto& entry : model_tensors) entry.second = entry.second.to(map_location);

  // 3. The optimiser.
  const Json optimizer = metadata_json(path, metadata, "optimizer");
  std::optional<OptimizerStateDict> optimizer_state;
  if (state.optimizer != nullptr && optimizer.is_null()) {
    info.notes.push_back("the checkpoint holds no optimizer state: the optimizer starts afresh");
    info.bit_exact = false;
  } else if (state.optimizer == nullptr && !optimizer.is_null()) {
    info.notes.push_back("the checkpoint's optimizer state was not restored (no optimizer was given)");
  } else if (state.optimizer != nullptr) {
    check(optimizer.is_object() && optimizer.contains("name") && optimizer["name"].is_string() &&
              optimizer.contains("param_group") && optimizer["param_group"].is_object(),
          path, "the checkpoint's \"optimizer\" metadata is malformed; the file is damaged");
    OptimizerStateDict saved;
    saved.optimizer = optimizer["name"].get<std::string>();
    saved.num_params = integer_in(path, optimizer, "optimizer", "num_params");
    for (const auto& [key, value] : optimizer["param_group"].items()) {
      const std::optional<HyperParameter> parsed = from_json(value);
      check(parsed.has_value(), path, "the optimizer's hyper-parameter \"", key, "\" is ", value.dump(),
            ", not a number, flag or list of numbers; the file is damaged");
      saved.param_group[key] = *parsed;
    }
    saved.state = with_prefix(tensors, kOptimizerPrefix);
    for (auto& entry : saved.state) entry.second = entry.second.to(map_location);
    optimizer_state = std::move(saved);
  }

  // 4. The scaler.
  const StateDict scaler_tensors = with_prefix(tensors, kScalerPrefix);
  std::optional<StateDict> scaler_before;
  if (state.scaler) {
    scaler_before = state.scaler->state_dict();
    if (scaler_tensors.empty() && !scaler_before->empty()) {
      info.notes.push_back("the checkpoint holds no GradScaler state (saved without AMP): the scaler keeps its "
                           "current scale");
      info.bit_exact = false;
    } else if (!scaler_tensors.empty() && scaler_before->empty()) {
      info.notes.push_back("the GradScaler is disabled: the checkpoint's scaler state was not restored");
      info.bit_exact = false;
    }
    for (auto& entry : *scaler_before) entry.second = entry.second.clone();
  } else if (!scaler_tensors.empty()) {
    info.notes.push_back("the checkpoint's GradScaler state was not restored (no scaler was given)");
    info.bit_exact = false;
  }

  // 5. The scheduler. Files written before schedulers have no entry: none was saved.
  const Json scheduler = metadata.count("scheduler") == 1 ? metadata_json(path, metadata, "scheduler") : Json();
  std::optional<LRSchedulerStateDict> scheduler_state;
  if (state.scheduler != nullptr && scheduler.is_null()) {
    info.notes.push_back("the checkpoint holds no learning-rate scheduler state: the scheduler starts afresh");
    info.bit_exact = false;
  } else if (state.scheduler == nullptr && !scheduler.is_null()) {
    info.notes.push_back("the checkpoint's learning-rate scheduler state was not restored (no scheduler was given): "
                         "the learning rate stays the saved one");
    info.bit_exact = false;
  } else if (state.scheduler != nullptr) {
    check(scheduler.is_object() && scheduler.contains("name") && scheduler["name"].is_string() &&
              scheduler.contains("base_lr") && scheduler["base_lr"].is_number(),
          path, "the checkpoint's \"scheduler\" metadata is malformed; the file is damaged");
    LRSchedulerStateDict saved;
    saved.scheduler = scheduler["name"].get<std::string>();
    saved.last_epoch = integer_in(path, scheduler, "scheduler", "last_epoch");
    saved.base_lr = scheduler["base_lr"].get<double>();
    for (const auto& [key, value] : scheduler.items()) {
      if (key == "name" || key == "last_epoch" || key == "base_lr") continue;
      check(value.is_number(), path, "the scheduler's setting \"", key, "\" is ", value.dump(),
            ", not a number; the file is damaged");
      saved.hyper_parameters[key] = value.get<double>();
    }
    scheduler_state = std::move(saved);
  }

  // 6. The sampler: same dataset and options, or the saved position means nothing.
  const Json sampler = metadata_json(path, metadata, "sampler");
  if (!sampler.is_null()) {
    info.sampler_seed = sampler.contains("seed") && sampler["seed"].is_number_unsigned()
                            ? sampler["seed"].get<uint64_t>()
                            : static_cast<uint64_t>(integer_in(path, sampler, "sampler", "seed"));
    info.sampler_epoch = integer_in(path, sampler, "sampler", "epoch");
  }
  if (state.sampler != nullptr) {
    check(!sampler.is_null(), path, "the checkpoint holds no sampler state, but a DistributedSampler was given to ",
          "restore; pass none, or resume from a checkpoint saved with its sampler");
    const int64_t dataset_size = integer_in(path, sampler, "sampler", "dataset_size");
    check(dataset_size == state.sampler->dataset_size(), path, "was saved for a dataset of ", dataset_size,
          " samples and this sampler covers ", state.sampler->dataset_size(),
          "; the saved position would point into another order");
    for (const char* option : {"shuffle", "drop_last"}) {
      check(sampler.contains(option) && sampler[option].is_boolean(), path, "the checkpoint's sampler has no \"",
            option, "\" flag; the file is damaged");
      const bool mine = std::string(option) == "shuffle" ? state.sampler->shuffle() : state.sampler->drop_last();
      check(sampler[option].get<bool>() == mine, path, "its sampler was built with ", option, "=",
            sampler[option].get<bool>() ? "true" : "false", " and this one with ", option, "=",
            mine ? "true" : "false", "; build the sampler as the saving run did");
    }
  }

  // 7. The generators: parse every state now, so that a bad one changes nothing.
  const Json generators = metadata_json(path, metadata, "generators");
  check(generators.is_object() && generators.contains("default") && generators["default"].is_array() &&
            !generators["default"].empty() && generators.contains("named") && generators["named"].is_object(),
        path, "the checkpoint's \"generators\" metadata is malformed; the file is damaged");
  const Json& defaults = generators["default"];
  std::optional<Generator> restored_default;
  const auto parse_generator = [&path](const Json& text, const std::string& what) {
    check(text.is_string(), path, "the state of generator ", what, " is not a text; the file is damaged");
    Generator g;
    try {
      g.set_state(text.get<std::string>());
    } catch (const Error& e) {
      fail(path, "the state of generator ", what, " is damaged: ", e.what());
    }
    return g;
  };
  if (defaults.size() == 1) {
    restored_default = parse_generator(defaults[0], "'default'");
    if (saved_world > 1 || world_size > 1)
      info.notes.push_back("one default generator state was saved (rank 0's); every rank restores it");
  } else if (static_cast<size_t>(rank) < defaults.size()) {
    restored_default = parse_generator(defaults[static_cast<size_t>(rank)], "'default' of rank " + std::to_string(rank));
  } else {
    info.notes.push_back(detail::concat("no default generator state was saved for rank ", rank,
                                        ": it keeps its current one"));
    info.bit_exact = false;
  }
  std::vector<std::pair<Generator*, Generator>> restored_named;
  for (const auto& [name, generator] : state.generators) {
    check(generators["named"].contains(name), path, "the checkpoint holds no state for generator '", name, "'");
    restored_named.emplace_back(generator, parse_generator(generators["named"][name], "'" + name + "'"));
  }

  // 8. Apply: the scheduler, the scaler and the optimiser, each of which checks everything
  // before it changes anything (those loaded before one that refuses are put back), then the
  // rest, which can no longer fail.
  std::optional<LRSchedulerStateDict> scheduler_before;
  try {
    if (scheduler_state) {
      scheduler_before = state.scheduler->state_dict();
      state.scheduler->load_state_dict(*scheduler_state);
    }
  } catch (const Error& e) {
    fail(path, e.what());
  }
  try {
    if (state.scaler && !scaler_tensors.empty() && !scaler_before->empty()) state.scaler->load_state_dict(scaler_tensors);
  } catch (const Error& e) {
    if (scheduler_before) state.scheduler->load_state_dict(*scheduler_before);
    fail(path, e.what());
  }
  try {
    if (optimizer_state) state.optimizer->load_state_dict(*optimizer_state);
  } catch (const Error& e) {
    if (scheduler_before) state.scheduler->load_state_dict(*scheduler_before);
    if (scaler_before && !scaler_before->empty()) state.scaler->load_state_dict(*scaler_before);
    fail(path, e.what());
  }
  state.model->load_state_dict(model_tensors, /*strict=*/true);
  if (restored_default) {
    const auto lock = lock_default_generator(nullptr);
    default_generator() = *restored_default;
  }
  for (auto& [generator, restored] : restored_named) *generator = restored;

  // 9. The position. Same world size: exactly where the saving run was. Otherwise the global
  // sample count is kept and the step count recomputed from it (see the header).
  if (saved_world != world_size) {
    const int64_t per_step = state.batch_size * world_size;
    info.step_in_epoch = per_step > 0 ? info.samples_in_epoch / per_step : 0;
    info.notes.push_back(detail::concat(
        "saved with ", saved_world, " rank", saved_world == 1 ? "" : "s", ", resumed with ", world_size,
        ": the data position is recomputed from the ", info.samples_in_epoch, " samples of epoch ", info.epoch,
        " already trained (step ", info.step_in_epoch, " of the epoch at ", world_size,
        " ranks); the weights and optimizer state are the saved ones, but later batches differ from the saving "
        "run's"));
    info.bit_exact = false;
  } else if (state.batch_size != info.saved_batch_size) {
    info.notes.push_back(detail::concat("saved with a batch size of ", info.saved_batch_size, " per rank, resumed with ",
                                        state.batch_size, ": the data position is kept in samples (",
                                        info.samples_in_epoch, " of epoch ", info.epoch, ")"));
    const int64_t per_step = state.batch_size * world_size;
    info.step_in_epoch = per_step > 0 ? info.samples_in_epoch / per_step : 0;
    info.bit_exact = false;
  }
  if (state.sampler != nullptr) {
    state.sampler->set_seed(info.sampler_seed);
    // The sampler's own epoch is the one to resume; the position applies to it only when it
    // is the training epoch (a sampler stepped past it has nothing left of it to skip).
    state.sampler->resume_at(info.sampler_epoch, info.sampler_epoch == info.epoch ? info.samples_in_epoch : 0);
  }
  state.epoch = info.epoch;
  state.step_in_epoch = info.step_in_epoch;
  state.global_step = info.global_step;
  return info;
}

}  // namespace lockstep
