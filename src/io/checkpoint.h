/// \file
/// Checkpoints that resume bit-exactly (chapter 6): one safetensors file holds everything a
/// data-parallel run needs to continue as if it had never stopped — the model's parameters and
/// buffers, the optimiser's state and hyper-parameters, the GradScaler's state, the sampler's
/// seed and position, the learning-rate scheduler's step count, and the random generators'
/// states — so that K steps, save, load, M steps give bitwise the same weights as K + M steps
/// in one run.
///
/// The file (readable by PyTorch's `safetensors.torch.load_file`, see
/// tests/reference/read_checkpoint.py):
///
///     tensors      "model.<name>"                 the model's state_dict (the inner module's:
///                                                 no "module." prefix from a DDP wrapper)
///                  "optimizer.state.<i>.<name>"   the optimiser's state (Optimizer::state_dict)
///                  "scaler.<name>"                GradScaler::state_dict(), when AMP is on
///     __metadata__ "format"          "lockstep.checkpoint"
///                  "format_version"  "2"          (a reader refuses a newer version, and
///                                                 version 1, whose checksum left the metadata out)
///                  and JSON texts:   "training" (epoch, step_in_epoch, global_step, batch_size,
///                                    samples_in_epoch), "world_size", "sampler", "generators",
///                                    "optimizer" (name, param_group, num_params), "scaler" (its
///                                    scalars, for reading), "scheduler" (name, last_epoch,
///                                    base_lr and its settings), "model" (the fingerprint: every
///                                    name, dtype and shape); "null" for an object not given
///                  "checksum"        "fnv1a64:<16 hex digits>" of every tensor (name, dtype,
///                                    shape, data) and every other metadata entry
///                                    (checkpoint_checksum(); tests/reference/read_checkpoint.py
///                                    computes it too)
///
/// The checksum covers everything the file says, so a file that passes it is the file
/// save_checkpoint wrote: damaged data and an edited learning rate, position or random state are
/// refused alike ("the file was changed after it was written"). Beyond it, every number is
/// checked on load before any object changes, so that a file made by hand cannot reach the
/// training objects either: positions and sizes are whole numbers of 0 or more, samples_in_epoch
/// is step_in_epoch x batch_size x world_size, the model's tensors are those its fingerprint
/// lists, and the optimiser's and scheduler's hyper-parameters pass their classes' own checks
/// (load_state_dict's: a learning rate >= 0, a momentum >= 0, betas in [0, 1), ...).
///
/// Saving is rank 0's job (PyTorch's save_on_master): every rank holds the same weights and
/// optimiser state under DDP, so one copy is enough, and one writer avoids ranks overwriting
/// each other's file. The write is atomic (io/safetensors.h): a temporary file beside the file
/// `<path>` names (through symbolic links, as torch.save writes through them: a link stays a
/// link), written, fsync'ed, renamed over that file, the folder fsync'ed. A save that fails or
/// is killed leaves the previous checkpoint intact, and a `<path>` that is a device, a FIFO, a
/// socket or a folder is refused before anything is written, never replaced.
///
/// Loading happens on every rank, each onto its own device. What is per rank: the default
/// random generator's state (e.g. dropout seeded with seed + rank); gather it to rank 0 with
/// all_gather_generator_states() before saving, and each rank gets its own back on load.
///
/// Why io does not include amp or distributed: they are folders of io's own layer
/// (docs/conventions.md), so the scaler is passed through stateful() and the process group
/// through the template all_gather_generator_states(); neither needs their headers here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/generator.h"
#include "data/distributed_sampler.h"
#include "nn/module.h"
#include "nn/state_dict.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace lockstep {

/// The format name every Lockstep checkpoint carries in its metadata ("format").
inline constexpr const char* kCheckpointFormat = "lockstep.checkpoint";
/// The format version this build writes, and the only one it reads (version 1's checksum did not
/// cover the metadata).
inline constexpr int kCheckpointFormatVersion = 2;
/// The metadata key of the checksum (checkpoint_checksum()).
inline constexpr const char* kCheckpointChecksumKey = "checksum";

/// Something whose state a checkpoint carries as named tensors: a GradScaler, or any object
/// with `StateDict state_dict() const` and `void load_state_dict(const StateDict&)`. Make one
/// with stateful().
struct StatefulRef {
  std::function<StateDict()> state_dict;                  ///< Returns the object's state.
  std::function<void(const StateDict&)> load_state_dict;  ///< Restores it.
};

/// A StatefulRef to `object`, which must outlive it: `state.scaler = stateful(scaler);`.
template <class T>
StatefulRef stateful(T& object) {
  return {[&object] { return object.state_dict(); }, [&object](const StateDict& s) { object.load_state_dict(s); }};
}

/// What a checkpoint saves and, on load, restores in place. The objects are the caller's; only
/// `model` is required.
struct TrainingState {
  /// The model: the module itself, not its DistributedDataParallel wrapper (pass
  /// `ddp->module()`), so that the names carry no "module." prefix and the checkpoint loads
  /// into an unwrapped model too (PyTorch's advice).
  Module* model = nullptr;
  /// The optimiser, or null.
  Optimizer* optimizer = nullptr;
  /// The learning-rate scheduler of `optimizer`, or null. Its step count sets the learning rate
  /// of every later step, so a run that warms up must save it to resume bit-exactly.
  LRScheduler* scheduler = nullptr;
  /// The GradScaler, as `stateful(scaler)`, or nothing.
  std::optional<StatefulRef> scaler;
  /// The DistributedSampler, or null: its seed, epoch, dataset size and options are saved; on
  /// load its seed is set and it is resumed at the saved position (resume_at).
  DistributedSampler* sampler = nullptr;
  /// Other generators a rank draws from (data augmentation, say), by name, the same on every
  /// rank. Their states are saved and restored; a name the checkpoint lacks is an error.
  std::vector<std::pair<std::string, Generator*>> generators;
  /// Every rank's default generator state, in rank order, from all_gather_generator_states()
  /// (needed when ranks draw different random numbers, e.g. seeded with seed + rank). Empty:
  /// the saving rank's own state is saved, and every rank gets it back on load.
  std::vector<std::string> default_generator_states;

  int64_t epoch = 0;          ///< The epoch in progress, from 0.
  int64_t step_in_epoch = 0;  ///< Batches of `epoch` already trained (the next one's index).
  int64_t global_step = 0;    ///< Iterations since the start of training.
  int64_t batch_size = 0;     ///< Samples per batch on each rank (for the data position).
};

/// An optimiser's class and hyper-parameters: its state_dict without the state tensors.
struct OptimizerSettings {
  std::string optimizer;                              ///< The class: "SGD", "Adam", "AdamW", ...
  std::map<std::string, HyperParameter> param_group;  ///< Its hyper-parameters, by PyTorch's names.
};

/// Where a loaded checkpoint resumes, what it restored over the objects' own settings, and what
/// the loader noticed.
struct ResumeInfo {
  int64_t epoch = 0;             ///< The epoch to continue.
  int64_t step_in_epoch = 0;     ///< Batches of it already trained at this world size (see notes).
  int64_t global_step = 0;       ///< Iterations trained so far.
  int64_t samples_in_epoch = 0;  ///< Samples of the epoch's order already trained, over all ranks.
  uint64_t sampler_seed = 0;     ///< The sampler's seed (0 if the checkpoint has no sampler).
  int64_t sampler_epoch = 0;     ///< The sampler's epoch.
  int saved_world_size = 0;      ///< The number of ranks that saved it.
  int64_t saved_batch_size = 0;  ///< Their batch size per rank.
  /// The optimiser's class and hyper-parameters the checkpoint restored, which replaced those the
  /// optimiser was built with, the learning rate too (as torch's optimizer.load_state_dict
  /// does): "lr", and SGD's "momentum", "dampening", "weight_decay", "nesterov" or Adam's
  /// "betas", "eps", "weight_decay". Empty when no optimizer state was restored.
  std::optional<OptimizerSettings> restored_optimizer;
  /// The learning-rate scheduler's state the checkpoint restored (class, step count, base_lr, and
  /// settings such as LinearLR's start_factor, end_factor and total_iters), which replaced the
  /// scheduler's own (as torch's scheduler.load_state_dict does). Empty when none was restored.
  std::optional<LRSchedulerStateDict> restored_scheduler;
  /// Whether the sampler was restored: then its seed is now sampler_seed, whatever it was built with.
  bool sampler_restored = false;
  /// Whether continuing gives exactly the run that saved it: same world size and batch size,
  /// every rank's generator state restored, and everything saved restored.
  bool bit_exact = true;
  /// Sentences about what differs from the saving run, e.g. "saved with 2 ranks, resumed with
  /// 3: the data position is recomputed ...". Empty when nothing does.
  std::vector<std::string> notes;
};

/// The checksum save_checkpoint stores under "checksum", of a checkpoint's `tensors` (in file
/// order, as load_safetensors returns them) and `metadata` (the "checksum" entry, if there is
/// one, left out): "fnv1a64:" and 16 hex digits of FNV-1a 64 over each tensor's name, dtype name,
/// shape as shape_str() writes it and data, then each metadata key and value in key order, every
/// field preceded by its length as 8 bytes, least significant first. load_checkpoint refuses a
/// file whose checksum is not this.
std::string checkpoint_checksum(const StateDict& tensors, const std::map<std::string, std::string>& metadata);

/// The "optimizer" metadata entry of both checkpoint formats (this one and the sharded one of
/// distributed/sharded_checkpoint.h), as JSON text: the class, the number of parameters and the
/// hyper-parameters of `state`, its tensors left out.
std::string optimizer_settings_json(const OptimizerStateDict& state);

/// Reads what optimizer_settings_json wrote back into an OptimizerStateDict without tensors.
/// Malformed text is an error beginning with `context` ("load_checkpoint: 'run.safetensors': ").
OptimizerStateDict parse_optimizer_settings_json(const std::string& text, const std::string& context);

/// Saves `state` to `path` when `rank` is 0 (save_on_master); other ranks return at once.
/// `world_size` and `state.batch_size` fix the data position: the epoch's first
/// `step_in_epoch * batch_size * world_size` samples are done. The tensors are copied to the
/// CPU for writing; the training objects are not changed. The write is atomic (see the file
/// comment). Call a barrier afterwards if other ranks go on to read the file.
///
/// Throws lockstep::Error, leaving any existing file at `path` as it was, when `state.model`
/// is null, a count is negative, the position step_in_epoch x batch_size x world_size is beyond
/// an int64_t, `default_generator_states` does not hold one state per rank,
/// `path` is not a regular file, or the file cannot be written (naming the path and the
/// system's reason).
void save_checkpoint(const std::string& path, const TrainingState& state, int rank, int world_size);

/// Loads the checkpoint at `path` into `state`'s objects in place, on rank `rank` of a job of
/// `world_size` ranks, and returns where to resume (also written to state.epoch, step_in_epoch
/// and global_step). The tensors are read onto `map_location` (torch.load's map_location) and
/// then copied into the model's parameters and buffers and the optimiser's state on their own
/// devices, as load_state_dict does; pass each rank's own device.
///
/// A different world size is allowed and said in the notes: the data position is kept as a
/// global sample count, samples_in_epoch = step_in_epoch * batch_size * saved_world_size, and
/// the sampler resumes there (DistributedSampler::resume_at); step_in_epoch becomes
/// samples_in_epoch / (batch_size * world_size), rounded down. The weights and optimiser state
/// are those of the saving run, but the steps after it see other batches, so the run is no
/// longer the bit-exact continuation. Every rank without a saved generator state of its own
/// (more ranks than saved) keeps its current default generator.
///
/// Every problem is one lockstep::Error sentence naming the file, and nothing is changed when
/// the checks fail: a missing, truncated or corrupt file (safetensors' own checks), a file
/// changed after it was written (its checksum, see the file comment), a number out of its range
/// (naming the field), the temporary file of an unfinished save (`*.tmp`, refused: only a
/// completed save renames it, so nothing vouches that it is whole; load the real file), a
/// safetensors file that is not a Lockstep checkpoint, a newer format version or version 1
/// (whose checksum does not cover the metadata: train again to get a version 2), another model (the first
/// name, shape or dtype that differs), another optimiser or a differently sized one, another
/// scheduler class, a sampler over another dataset, a missing named generator. A scheduler
/// given without one in the file (or saved and not given) is a note, not an error: the run
/// goes on, no longer bit-exact.
ResumeInfo load_checkpoint(const std::string& path, TrainingState& state, Device map_location, int rank,
                           int world_size);

/// Every rank's default generator state (Generator::get_state of default_generator()), in rank
/// order, gathered to every rank with `group` (a ProcessGroup, or anything with rank(), size()
/// and all_gather(output, input) of CPU i64 and u8 tensors). Collective: every rank calls it,
/// before save_checkpoint, and puts the result in TrainingState::default_generator_states. A
/// template so that io needs no header of distributed (a folder of its own layer).
template <class Group>
std::vector<std::string> all_gather_generator_states(Group& group) {
  std::string mine;
  {
    const auto lock = lock_default_generator(nullptr);
    mine = default_generator().get_state();
  }
  const int64_t world = group.size();
  // The states' lengths differ (decimal numbers), so first the lengths, then the bytes padded
  // to the longest: all_gather needs the same shape on every rank.
  const Tensor length = full({1}, static_cast<double>(mine.size()), TensorOptions().dtype(DType::i64));
  const Tensor lengths = empty({world}, TensorOptions().dtype(DType::i64));
  group.all_gather(lengths, length);
  const std::vector<int64_t> sizes = lengths.to_vector<int64_t>();
  int64_t longest = 0;
  for (int64_t n : sizes) longest = std::max(longest, n);
  const Tensor bytes = zeros({longest}, TensorOptions().dtype(DType::u8));
  std::memcpy(bytes.data(), mine.data(), mine.size());
  const Tensor all = empty({world * longest}, TensorOptions().dtype(DType::u8));
  group.all_gather(all, bytes);
  std::vector<std::string> states;
  const auto* data = static_cast<const char*>(all.data());
  for (int64_t r = 0; r < world; ++r) states.emplace_back(data + r * longest, static_cast<size_t>(sizes[r]));
  return states;
}

}  // namespace lockstep
