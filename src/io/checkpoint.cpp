// Checkpoints: the training state as one safetensors file, tensors plus JSON metadata (see
// io/checkpoint.h for the layout and the rules). Saving builds the whole file in memory's terms
// first (names, metadata, checksum), then writes it atomically with save_safetensors; loading
// checks every part of the file against the objects before it changes any of them.
#include "io/checkpoint.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

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

// `hash` continued over one field: its length as 8 bytes, least significant first, then its
// bytes. The length keeps fields apart: "ab" + "c" and "a" + "bc" hash differently.
uint64_t hash_field(const void* data, size_t size, uint64_t hash) {
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(size) >> (8 * i));
  return fnv1a(data, size, fnv1a(length, sizeof(length), hash));
}
uint64_t hash_field(const std::string& text, uint64_t hash) { return hash_field(text.data(), text.size(), hash); }

// The samples of an epoch that `steps` steps of `batch_size` per rank on `world_size` ranks
// train, or nothing when the product is beyond an int64_t.
std::optional<int64_t> samples_done(int64_t steps, int64_t batch_size, int64_t world_size) {
  int64_t per_step = 0, samples = 0;
  if (__builtin_mul_overflow(batch_size, world_size, &per_step) || __builtin_mul_overflow(steps, per_step, &samples))
    return std::nullopt;
  return samples;
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

}  // namespace

// A file that matches is the file save_checkpoint wrote: neither damaged (bit rot, a copy cut
// short, zeroed blocks after a crash) nor edited (a learning rate, a position, a random state,
// a dtype changed by hand). FNV-1a (util/fnv1a.h) is no defence against an attacker, who can
// recompute it; the checks of each section keep such a file from the training objects.
std::string checkpoint_checksum(const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  uint64_t hash = kFnv1aOffsetBasis;
  for (const auto& [name, tensor] : tensors) {
    const Tensor t = tensor.contiguous();
    hash = hash_field(name, hash);
    hash = hash_field(dtype_name(t.dtype()), hash);
    hash = hash_field(shape_str(t.shape()), hash);
    hash = hash_field(t.data(), static_cast<size_t>(t.numel()) * element_size(t.dtype()), hash);
  }
  for (const auto& [key, value] : metadata) {
    if (key == kCheckpointChecksumKey) continue;
    hash = hash_field(value, hash_field(key, hash));
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, hash);
  return std::string("fnv1a64:") + text;
}

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
  const std::optional<int64_t> samples_in_epoch = samples_done(state.step_in_epoch, state.batch_size, world_size);
  LOCKSTEP_CHECK(samples_in_epoch.has_value(), "save_checkpoint: step_in_epoch x batch_size x world_size (",
                 state.step_in_epoch, " x ", state.batch_size, " x ", world_size,
                 ") is more samples than an int64_t counts; pass the position of the epoch in progress");
  training["samples_in_epoch"] = *samples_in_epoch;
  metadata["training"] = training.dump();

  Json optimizer = nullptr;
  if (state.optimizer != nullptr) {
    const OptimizerStateDict saved = state.optimizer->state_dict();
    add(kOptimizerPrefix, saved.state);
    optimizer = Json::parse(optimizer_settings_json(saved));
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
  metadata[kCheckpointChecksumKey] = checkpoint_checksum(tensors, metadata);  // last: it covers every other entry

  save_safetensors(path, tensors, metadata);
}

namespace {

// ---- Loading: read the file, parse and check each section against the objects, then apply.

// A checkpoint as read from its file, and the start of every message about it.
struct CheckpointFile {
  std::string context;  // "load_checkpoint: '<path>': "
  std::map<std::string, std::string> metadata;
  StateDict tensors;
};

// A sentence for ResumeInfo::notes, and whether the run stays the bit-exact continuation of the
// saving run all the same.
struct Note {
  std::string text;
  bool bit_exact;
};

// What a section of the checkpoint gives: a value to restore or resume from, and what to say.
template <class T>
struct Parsed {
  T value{};
  std::vector<Note> notes;
};

// The deepest a metadata entry may nest JSON; save_checkpoint's nest 3 at most (the model's
// fingerprint: a list of [name, dtype, shape]).
constexpr int kMaxMetadataNesting = 8;

// The metadata value under `key`, parsed as JSON; a missing key, bad JSON or JSON nested deeper
// than kMaxMetadataNesting is a damaged file.
Json metadata_json(const CheckpointFile& file, const std::string& key) {
  const auto found = file.metadata.find(key);
  LOCKSTEP_CHECK(found != file.metadata.end(), file.context, "the checkpoint's metadata has no \"", key,
                 "\" entry; the file is damaged or was not written by save_checkpoint");
  // Refused while it is parsed, so that no walk of it (printing, comparing) nests that deep.
  const auto shallow = [&](int depth, Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    LOCKSTEP_CHECK(!opens || depth < kMaxMetadataNesting, file.context, "the checkpoint's metadata \"", key,
                   "\" nests JSON more than ", kMaxMetadataNesting, " levels deep; the file is damaged");
    return true;
  };
  try {
    return Json::parse(found->second, shallow);
  } catch (const Json::exception& e) {  // a syntax error, or a number beyond a double (1e999)
    LOCKSTEP_FAIL(file.context, "the checkpoint's metadata \"", key, "\" is not valid JSON (", e.what(),
                  "); the file is damaged");
  }
}

// The metadata value under `key` as a whole number (all of its text); otherwise a damaged file.
int64_t metadata_integer(const CheckpointFile& file, const std::string& key) {
  const auto found = file.metadata.find(key);
  LOCKSTEP_CHECK(found != file.metadata.end(), file.context, "the checkpoint's metadata has no \"", key,
                 "\"; the file is damaged");
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(found->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LOCKSTEP_CHECK(used > 0 && used == found->second.size(), file.context, "the checkpoint's \"", key,
                 "\" is not a whole number; the file is damaged");
  return value;
}

// `json[key]` as a count (a whole number from 0 to 2^63 - 1: a position, a size, a step), or an
// error naming the field; `where` names the metadata entry.
int64_t count_in(const CheckpointFile& file, const Json& json, const char* where, const char* key) {
  LOCKSTEP_CHECK(json.is_object() && json.contains(key) && json[key].is_number_integer(), file.context,
                 "the checkpoint's \"", where, "\" metadata has no whole number \"", key, "\"; the file is damaged");
  const Json& value = json[key];
  const bool in_range = value.is_number_unsigned()
                            ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                            : value.get<int64_t>() >= 0;
  LOCKSTEP_CHECK(in_range, file.context, "the checkpoint's \"", where, "\" metadata has ", key, " ", value.dump(),
                 "; expected a whole number of 0 or more (the file is damaged)");
  return value.get<int64_t>();
}

// The entries of `tensors` whose names start with `prefix`, the prefix removed.
StateDict with_prefix(const StateDict& tensors, const std::string& prefix) {
  StateDict out;
  for (const auto& [name, t] : tensors)
    if (starts_with(name, prefix)) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

// `tensors` on `device` (torch.load's map_location).
StateDict to_device(StateDict tensors, Device device) {
  for (auto& entry : tensors) entry.second = entry.second.to(device);
  return tensors;
}

// The file at `path`: safetensors' own checks (truncation, bad header, bad offsets), then that
// it is a Lockstep checkpoint of a version this build reads, whose data matches its checksum.
CheckpointFile read_checkpoint_file(const std::string& path) {
  CheckpointFile file;
  file.context = detail::concat("load_checkpoint: '", path, "': ");
  // A temporary is what a save leaves when it is killed before the rename; nothing says it
  // reached the disk whole, so it is never loaded (the real file is the last complete save).
  LOCKSTEP_CHECK(!ends_with(path, ".tmp"), file.context,
                 "is the temporary file of a save that did not finish (a completed save renames it to '",
                 path.substr(0, path.size() - 4),
                 "'); load that file instead, or rename this one if you know it is complete");
  try {
    file.tensors = load_safetensors(path, &file.metadata);
  } catch (const Error& e) {
    LOCKSTEP_FAIL("load_checkpoint: ", e.what());
  }
  const auto format = file.metadata.find("format");
  LOCKSTEP_CHECK(format != file.metadata.end() && format->second == kCheckpointFormat, file.context,
                 "is a safetensors file but not a Lockstep checkpoint (its metadata has no \"format\": \"",
                 kCheckpointFormat, "\"); for plain weights use load_safetensors and Module::load_state_dict");
  const int64_t version = metadata_integer(file, "format_version");
  LOCKSTEP_CHECK(version <= kCheckpointFormatVersion, file.context,
                 "was written by a newer Lockstep (checkpoint format version ", version,
                 "; this build reads up to version ", kCheckpointFormatVersion, "); update Lockstep to load it");
  LOCKSTEP_CHECK(version >= 1, file.context, "has checkpoint format version ", version, ", which no Lockstep writes");
  // Version 1's checksum covered the tensors alone: nothing vouches for its metadata.
  LOCKSTEP_CHECK(version == kCheckpointFormatVersion, file.context,
                 "was written by an older Lockstep (checkpoint format version ", version,
                 "), whose checksum does not cover the metadata, so an edited learning rate, position or random "
                 "state would load unnoticed; train again with this version, whose checkpoints (format version ",
                 kCheckpointFormatVersion, ") it covers");
  const auto saved_checksum = file.metadata.find(kCheckpointChecksumKey);
  LOCKSTEP_CHECK(saved_checksum != file.metadata.end() &&
                     saved_checksum->second == checkpoint_checksum(file.tensors, file.metadata),
                 file.context, "the file was changed after it was written: its tensors or metadata do not match the ",
                 "checksum saved with it (damaged on a disk or in a copy, or edited); use an earlier checkpoint");
  return file;
}

// Where the saving run was: the "training" entry and the world size.
struct SavedPosition {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t global_step = 0;
  int64_t batch_size = 0;
  int64_t samples_in_epoch = 0;
  int64_t world_size = 0;
};

SavedPosition parse_training(const CheckpointFile& file) {
  const Json training = metadata_json(file, "training");
  SavedPosition saved;
  saved.world_size = metadata_integer(file, "world_size");
  LOCKSTEP_CHECK(saved.world_size >= 1 && saved.world_size <= std::numeric_limits<int>::max(), file.context,
                 "the checkpoint's \"world_size\" is ", saved.world_size, "; expected a number of ranks from 1 to ",
                 std::numeric_limits<int>::max(), " (the file is damaged)");
  saved.epoch = count_in(file, training, "training", "epoch");
  saved.global_step = count_in(file, training, "training", "global_step");
  saved.batch_size = count_in(file, training, "training", "batch_size");
  saved.samples_in_epoch = count_in(file, training, "training", "samples_in_epoch");
  saved.step_in_epoch = count_in(file, training, "training", "step_in_epoch");
  // The sampler resumes at samples_in_epoch; save_checkpoint writes it as this product.
  LOCKSTEP_CHECK(samples_done(saved.step_in_epoch, saved.batch_size, saved.world_size) == saved.samples_in_epoch,
                 file.context, "the checkpoint's \"training\" metadata has samples_in_epoch ", saved.samples_in_epoch,
                 ", which is not step_in_epoch x batch_size x world_size (", saved.step_in_epoch, " x ",
                 saved.batch_size, " x ", saved.world_size, "); the file is damaged");
  return saved;
}

// Compares the checkpoint's model fingerprint with the model's state_dict, and fails at the
// first difference with a sentence that names it.
void check_same_model(const CheckpointFile& file, const Json& saved, const StateDict& mine) {
  LOCKSTEP_CHECK(saved.is_array(), file.context, "the checkpoint's \"model\" metadata is not a list; the file is damaged");
  std::map<std::string, std::pair<std::string, Shape>> theirs;
  std::vector<std::string> order;
  for (const Json& entry : saved) {
    const auto whole_number = [](const Json& d) { return d.is_number_integer(); };
    const bool well_formed = entry.is_array() && entry.size() == 3 && entry[0].is_string() &&
                             entry[1].is_string() && entry[2].is_array() &&
                             std::all_of(entry[2].begin(), entry[2].end(), whole_number);
    LOCKSTEP_CHECK(well_formed, file.context,
                   "the checkpoint's \"model\" metadata has a malformed entry; the file is damaged");
    Shape shape;
    for (const Json& d : entry[2]) shape.push_back(d.get<int64_t>());
    theirs[entry[0].get<std::string>()] = {entry[1].get<std::string>(), shape};
    order.push_back(entry[0].get<std::string>());
  }
  // The most common mistake first: a state_dict saved from (or loaded into) a DDP wrapper.
  const bool saved_wrapped = !order.empty() && starts_with(order.front(), "module.");
  const bool mine_wrapped = !mine.empty() && starts_with(mine.front().first, "module.");
  LOCKSTEP_CHECK(saved_wrapped == mine_wrapped, file.context, saved_wrapped ? "the checkpoint's" : "this model's",
                 " names start with \"module.\" (a DistributedDataParallel wrapper's state_dict) and ",
                 saved_wrapped ? "this model's" : "the checkpoint's",
                 " do not; save and load the inner module (ddp->module()) on both sides");
  for (const auto& [name, t] : mine) {
    const auto found = theirs.find(name);
    LOCKSTEP_CHECK(found != theirs.end(), file.context, "holds another model: this model has '", name,
                   "' and the checkpoint does not (the checkpoint's model has ", order.size(), " entries, this one ",
                   mine.size(), ")");
    LOCKSTEP_CHECK(found->second.second == t.shape(), file.context, "holds another model: its '", name,
                   "' has shape ", shape_str(found->second.second), ", this model's has ", shape_str(t.shape()));
    LOCKSTEP_CHECK(found->second.first == dtype_name(t.dtype()), file.context, "its '", name, "' is ",
                   found->second.first, ", this model's is ", dtype_name(t.dtype()),
                   "; convert the model (model.to(dtype)) before loading");
  }
  for (const std::string& name : order) {
    bool present = false;
    for (const auto& entry : mine) present = present || entry.first == name;
    LOCKSTEP_CHECK(present, file.context, "holds another model: the checkpoint has '", name,
                   "' and this model does not");
  }
}

// The model's tensors on `map_location`, once the checkpoint's fingerprint matches both `model`
// and the file's own "model." tensors (so that Module::load_state_dict cannot refuse them
// half-way through the restore).
StateDict parse_model(const CheckpointFile& file, const Module& model, Device map_location) {
  const Json saved = metadata_json(file, "model");
  check_same_model(file, saved, model.state_dict());
  StateDict tensors = with_prefix(file.tensors, kModelPrefix);
  LOCKSTEP_CHECK(fingerprint(tensors) == saved, file.context, "its \"", kModelPrefix,
                 "\" tensors are not those its \"model\" metadata lists (names, dtypes and shapes); the file is "
                 "damaged");
  return to_device(std::move(tensors), map_location);
}

// A part of the training state that the checkpoint may hold (`saved`) and the caller may pass
// an object for (`given`). With both, parse() reads the state to restore; with one alone
// nothing is restored, and that side's note says so.
template <class T, class Parse>
Parsed<std::optional<T>> saved_and_given(bool saved, bool given, Note only_given, Note only_saved,
                                         const Parse& parse) {
  Parsed<std::optional<T>> part;
  if (saved && given) {
    part.value = parse();
  } else if (given) {
    part.notes.push_back(std::move(only_given));
  } else if (saved) {
    part.notes.push_back(std::move(only_saved));
  }
  return part;
}

// The "optimizer" entry: the class, its number of parameters and its hyper-parameters, each of
// a kind a param group holds. Their ranges are the class's own (momentum >= 0, betas in [0, 1),
// ...): its load_state_dict checks them before it changes anything.
OptimizerStateDict parse_optimizer_settings(const CheckpointFile& file, const Json& saved) {
  return parse_optimizer_settings_json(saved.dump(), file.context);
}

Parsed<std::optional<OptimizerStateDict>> parse_optimizer(const CheckpointFile& file, const Optimizer* optimizer,
                                                          Device map_location) {
  const Json saved = metadata_json(file, "optimizer");
  // Read whether or not an optimiser is given: a malformed entry is refused either way.
  std::optional<OptimizerStateDict> settings;
  if (!saved.is_null()) settings = parse_optimizer_settings(file, saved);
  return saved_and_given<OptimizerStateDict>(
      settings.has_value(), optimizer != nullptr,
      {"the checkpoint holds no optimizer state: the optimizer starts afresh", false},
      {"the checkpoint's optimizer state was not restored (no optimizer was given)", true}, [&] {
        OptimizerStateDict state = *settings;
        state.state = to_device(with_prefix(file.tensors, kOptimizerPrefix), map_location);
        return state;
      });
}

// A disabled scaler has no state (GradScaler::state_dict() is empty): it takes none.
Parsed<std::optional<StateDict>> parse_scaler(const CheckpointFile& file, const std::optional<StatefulRef>& scaler) {
  const StateDict saved = with_prefix(file.tensors, kScalerPrefix);
  return saved_and_given<StateDict>(
      !saved.empty(), scaler && !scaler->state_dict().empty(),
      {"the checkpoint holds no GradScaler state (saved without AMP): the scaler keeps its current scale", false},
      {scaler ? "the GradScaler is disabled: the checkpoint's scaler state was not restored"
              : "the checkpoint's GradScaler state was not restored (no scaler was given)",
       false},
      [&] { return saved; });
}

// The "scheduler" entry: the class, step count, base_lr and settings. Their ranges are the
// class's own (LinearLR's start_factor in (0, 1], ...): its load_state_dict checks them before
// it changes anything.
LRSchedulerStateDict parse_scheduler_state(const CheckpointFile& file, const Json& saved) {
  LOCKSTEP_CHECK(saved.is_object() && saved.contains("name") && saved["name"].is_string() &&
                     saved.contains("base_lr") && saved["base_lr"].is_number(),
                 file.context, "the checkpoint's \"scheduler\" metadata is malformed; the file is damaged");
  LRSchedulerStateDict state;
  state.scheduler = saved["name"].get<std::string>();
  state.last_epoch = count_in(file, saved, "scheduler", "last_epoch");
  state.base_lr = saved["base_lr"].get<double>();
  for (const auto& [key, value] : saved.items()) {
    if (key == "name" || key == "last_epoch" || key == "base_lr") continue;
    LOCKSTEP_CHECK(value.is_number(), file.context, "the scheduler's setting \"", key, "\" is ", value.dump(),
                   ", not a number; the file is damaged");
    state.hyper_parameters[key] = value.get<double>();
  }
  return state;
}

Parsed<std::optional<LRSchedulerStateDict>> parse_scheduler(const CheckpointFile& file,
                                                              const LRScheduler* scheduler) {
  // Read whether or not a scheduler is given: a malformed entry is refused either way.
  const Json saved = metadata_json(file, "scheduler");
  std::optional<LRSchedulerStateDict> state;
  if (!saved.is_null()) state = parse_scheduler_state(file, saved);
  return saved_and_given<LRSchedulerStateDict>(
      state.has_value(), scheduler != nullptr,
      {"the checkpoint holds no learning-rate scheduler state: the scheduler starts afresh", false},
      {"the checkpoint's learning-rate scheduler state was not restored (no scheduler was given): the learning "
       "rate stays the saved one",
       false},
      [&] { return *state; });
}

// The sampler's seed and epoch (zeros when none was saved), and whether they are restored.
struct SavedSampler {
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool restored = false;
};

// A sampler to restore must cover the same dataset with the same options, or the saved
// position would point into another order.
SavedSampler parse_sampler(const CheckpointFile& file, const DistributedSampler* sampler) {
  const Json saved = metadata_json(file, "sampler");
  LOCKSTEP_CHECK(sampler == nullptr || !saved.is_null(), file.context, "the checkpoint holds no sampler state, but ",
                 "a DistributedSampler was given to restore; pass none, or resume from a checkpoint saved with its "
                 "sampler");
  SavedSampler out;
  if (saved.is_null()) return out;
  LOCKSTEP_CHECK(saved.is_object() && saved.contains("seed") && saved["seed"].is_number_unsigned(), file.context,
                 "the checkpoint's \"sampler\" metadata has no whole number \"seed\" of 0 or more; the file is "
                 "damaged");
  out.seed = saved["seed"].get<uint64_t>();
  out.epoch = count_in(file, saved, "sampler", "epoch");
  const int64_t dataset_size = count_in(file, saved, "sampler", "dataset_size");
  const auto flag = [&](const char* option) {
    LOCKSTEP_CHECK(saved.contains(option) && saved[option].is_boolean(), file.context,
                   "the checkpoint's sampler has no \"", option, "\" flag; the file is damaged");
    return saved[option].get<bool>();
  };
  const bool shuffle = flag("shuffle"), drop_last = flag("drop_last");
  if (sampler == nullptr) return out;
  LOCKSTEP_CHECK(dataset_size == sampler->dataset_size(), file.context, "was saved for a dataset of ", dataset_size,
                 " samples and this sampler covers ", sampler->dataset_size(),
                 "; the saved position would point into another order");
  using Option = std::tuple<const char*, bool, bool>;  // name, the checkpoint's, this sampler's
  for (const auto& [option, theirs, mine] :
       {Option{"shuffle", shuffle, sampler->shuffle()}, Option{"drop_last", drop_last, sampler->drop_last()}}) {
    LOCKSTEP_CHECK(theirs == mine, file.context, "its sampler was built with ", option, "=", theirs ? "true" : "false",
                   " and this one with ", option, "=", mine ? "true" : "false",
                   "; build the sampler as the saving run did");
  }
  out.restored = true;
  return out;
}

// The generators' states, each already parsed, so that a damaged one changes nothing.
struct SavedGenerators {
  std::optional<Generator> default_generator;  // this rank's, if one was saved for it
  std::vector<std::pair<Generator*, Generator>> named;
};

// The generator whose state is `text`; `what` names it in the message if it is damaged.
Generator parse_generator(const CheckpointFile& file, const Json& text, const std::string& what) {
  LOCKSTEP_CHECK(text.is_string(), file.context, "the state of generator ", what, " is not a text; the file is damaged");
  Generator generator;
  try {
    generator.set_state(text.get<std::string>());
  } catch (const Error& e) {
    LOCKSTEP_FAIL(file.context, "the state of generator ", what, " is damaged: ", e.what());
  }
  return generator;
}

Parsed<SavedGenerators> parse_generators(const CheckpointFile& file,
                                         const std::vector<std::pair<std::string, Generator*>>& named, int rank,
                                         int64_t saved_world_size, int world_size) {
  const Json saved = metadata_json(file, "generators");
  LOCKSTEP_CHECK(saved.is_object() && saved.contains("default") && saved["default"].is_array() &&
                     !saved["default"].empty() && saved.contains("named") && saved["named"].is_object(),
                 file.context, "the checkpoint's \"generators\" metadata is malformed; the file is damaged");
  const Json& defaults = saved["default"];
  Parsed<SavedGenerators> generators;
  if (defaults.size() == 1) {
    generators.value.default_generator = parse_generator(file, defaults[0], "'default'");
    if (saved_world_size > 1 || world_size > 1)
      generators.notes.push_back({"one default generator state was saved (rank 0's); every rank restores it", true});
  } else if (static_cast<size_t>(rank) < defaults.size()) {
    generators.value.default_generator =
        parse_generator(file, defaults[static_cast<size_t>(rank)], "'default' of rank " + std::to_string(rank));
  } else {
    generators.notes.push_back(
        {detail::concat("no default generator state was saved for rank ", rank, ": it keeps its current one"), false});
  }
  for (const auto& [name, generator] : named) {
    LOCKSTEP_CHECK(saved["named"].contains(name), file.context, "the checkpoint holds no state for generator '", name,
                   "'");
    generators.value.named.emplace_back(generator, parse_generator(file, saved["named"][name], "'" + name + "'"));
  }
  return generators;
}

// The step of the epoch to resume at. Same world size and batch size: exactly where the saving
// run was. Otherwise the global sample count is kept and the step recomputed from it (see the
// header).
Parsed<int64_t> resume_step(const SavedPosition& saved, int world_size, int64_t batch_size) {
  const int64_t per_step = batch_size * world_size;
  const int64_t recomputed = per_step > 0 ? saved.samples_in_epoch / per_step : 0;
  if (saved.world_size != world_size) {
    return {recomputed,
            {{detail::concat("saved with ", saved.world_size, " rank", saved.world_size == 1 ? "" : "s",
                             ", resumed with ", world_size, ": the data position is recomputed from the ",
                             saved.samples_in_epoch, " samples of epoch ", saved.epoch, " already trained (step ",
                             recomputed, " of the epoch at ", world_size,
                             " ranks); the weights and optimizer state are the saved ones, but later batches differ "
                             "from the saving run's"),
              false}}};
  }
  if (batch_size != saved.batch_size) {
    return {recomputed,
            {{detail::concat("saved with a batch size of ", saved.batch_size, " per rank, resumed with ", batch_size,
                             ": the data position is kept in samples (", saved.samples_in_epoch, " of epoch ",
                             saved.epoch, ")"),
              false}}};
  }
  return {saved.step_in_epoch, {}};
}

// The checkpoint's sections, each parsed and checked against the object it goes into.
struct ParsedCheckpoint {
  SavedPosition saved;
  StateDict model;
  Parsed<std::optional<OptimizerStateDict>> optimizer;
  Parsed<std::optional<StateDict>> scaler;
  Parsed<std::optional<LRSchedulerStateDict>> scheduler;
  SavedSampler sampler;
  Parsed<SavedGenerators> generators;
  Parsed<int64_t> step_in_epoch;
};

// Where to resume, and the sections' notes in the order of the sections.
ResumeInfo resume_info(const ParsedCheckpoint& checkpoint) {
  ResumeInfo info;
  info.epoch = checkpoint.saved.epoch;
  info.step_in_epoch = checkpoint.step_in_epoch.value;
  info.global_step = checkpoint.saved.global_step;
  info.samples_in_epoch = checkpoint.saved.samples_in_epoch;
  info.sampler_seed = checkpoint.sampler.seed;
  info.sampler_epoch = checkpoint.sampler.epoch;
  info.saved_world_size = static_cast<int>(checkpoint.saved.world_size);
  info.saved_batch_size = checkpoint.saved.batch_size;
  if (const auto& optimizer = checkpoint.optimizer.value)
    info.restored_optimizer = OptimizerSettings{optimizer->optimizer, optimizer->param_group};
  info.restored_scheduler = checkpoint.scheduler.value;
  info.sampler_restored = checkpoint.sampler.restored;
  for (const std::vector<Note>* notes :
       {&checkpoint.optimizer.notes, &checkpoint.scaler.notes, &checkpoint.scheduler.notes,
        &checkpoint.generators.notes, &checkpoint.step_in_epoch.notes}) {
    for (const Note& note : *notes) {
      info.notes.push_back(note.text);
      info.bit_exact = info.bit_exact && note.bit_exact;
    }
  }
  return info;
}

// Restores `checkpoint` into `state`'s objects and resumes the sampler at `info`'s position.
// The scheduler, the scaler and the optimiser each check everything before they change
// anything; when one refuses, those restored before it are put back, so the objects stay as
// they were. What comes after them can no longer fail.
void apply(const CheckpointFile& file, const ParsedCheckpoint& checkpoint, const ResumeInfo& info,
           TrainingState& state) {
  std::vector<std::function<void()>> put_back;
  try {
    if (const auto& scheduler = checkpoint.scheduler.value) {
      const LRSchedulerStateDict before = state.scheduler->state_dict();
      state.scheduler->load_state_dict(*scheduler);
      put_back.push_back([&state, before] { state.scheduler->load_state_dict(before); });
    }
    if (const auto& scaler = checkpoint.scaler.value) {
      StateDict before = state.scaler->state_dict();
      for (auto& entry : before) entry.second = entry.second.clone();
      state.scaler->load_state_dict(*scaler);
      put_back.push_back([&state, before] { state.scaler->load_state_dict(before); });
    }
    if (const auto& optimizer = checkpoint.optimizer.value) state.optimizer->load_state_dict(*optimizer);
  } catch (const Error& e) {
    for (auto undo = put_back.rbegin(); undo != put_back.rend(); ++undo) (*undo)();
    LOCKSTEP_FAIL(file.context, e.what());
  }
  state.model->load_state_dict(checkpoint.model, /*strict=*/true);
  if (const auto& restored = checkpoint.generators.value.default_generator) {
    const auto lock = lock_default_generator(nullptr);
    default_generator() = *restored;
  }
  for (const auto& [generator, restored] : checkpoint.generators.value.named) *generator = restored;
  if (state.sampler != nullptr) {
    state.sampler->set_seed(info.sampler_seed);
    // The sampler's own epoch is the one to resume; the position applies to it only when it
    // is the training epoch (a sampler stepped past it has nothing left of it to skip).
    state.sampler->resume_at(info.sampler_epoch, info.sampler_epoch == info.epoch ? info.samples_in_epoch : 0);
  }
  state.epoch = info.epoch;
  state.step_in_epoch = info.step_in_epoch;
  state.global_step = info.global_step;
}

}  // namespace

ResumeInfo load_checkpoint(const std::string& path, TrainingState& state, Device map_location, int rank,
                           int world_size) {
  LOCKSTEP_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "load_checkpoint: expected 0 <= rank < ",
                 "world_size, got rank ", rank, " of ", world_size);
  LOCKSTEP_CHECK(state.model != nullptr, "load_checkpoint: TrainingState::model is null; pass the model to load into");
  // Every section is parsed and checked against its object before anything changes.
  const CheckpointFile file = read_checkpoint_file(path);
  ParsedCheckpoint checkpoint;
  checkpoint.saved = parse_training(file);
  checkpoint.model = parse_model(file, *state.model, map_location);
  checkpoint.optimizer = parse_optimizer(file, state.optimizer, map_location);
  checkpoint.scaler = parse_scaler(file, state.scaler);
  checkpoint.scheduler = parse_scheduler(file, state.scheduler);
  checkpoint.sampler = parse_sampler(file, state.sampler);
  checkpoint.generators = parse_generators(file, state.generators, rank, checkpoint.saved.world_size, world_size);
  checkpoint.step_in_epoch = resume_step(checkpoint.saved, world_size, state.batch_size);
  const ResumeInfo info = resume_info(checkpoint);
  apply(file, checkpoint, info, state);
  return info;
}

std::string optimizer_settings_json(const OptimizerStateDict& state) {
  Json optimizer = Json::object();
  optimizer["name"] = state.optimizer;
  optimizer["num_params"] = state.num_params;
  Json group = Json::object();
  for (const auto& [key, value] : state.param_group) group[key] = to_json(value);
  optimizer["param_group"] = group;
  return optimizer.dump();
}

// The class, its number of parameters and its hyper-parameters, each of a kind a param group
// holds. Their ranges are the class's own (momentum >= 0, betas in [0, 1), ...): its
// load_state_dict checks them before it changes anything.
OptimizerStateDict parse_optimizer_settings_json(const std::string& text, const std::string& context) {
  const Json saved = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  LOCKSTEP_CHECK(saved.is_object() && saved.contains("name") && saved["name"].is_string() &&
                     saved.contains("param_group") && saved["param_group"].is_object() &&
                     saved.contains("num_params") && saved["num_params"].is_number_integer() &&
                     saved["num_params"].get<int64_t>() >= 0,
                 context, "the checkpoint's \"optimizer\" metadata is malformed; the file is damaged");
  OptimizerStateDict settings;
  settings.optimizer = saved["name"].get<std::string>();
  settings.num_params = saved["num_params"].get<int64_t>();
  for (const auto& [key, value] : saved["param_group"].items()) {
    const std::optional<HyperParameter> parsed = from_json(value);
    LOCKSTEP_CHECK(parsed.has_value(), context, "the optimizer's hyper-parameter \"", key, "\" is ",
                   value.dump(), ", not a number, flag or list of numbers; the file is damaged");
    settings.param_group[key] = *parsed;
  }
  return settings;
}

}  // namespace lockstep
