// Fuzz target: the checkpoint loader's reading of the metadata (load_checkpoint;
// src/io/checkpoint.h), the part of a checkpoint that says where and how a run resumes.
//
// Feeds: the input as the metadata of a small valid checkpoint, one KEY=VALUE per line (a line
// without '=' is ignored; a later line replaces an earlier one of the same key). Its tensors are
// always those of the model and optimiser below, and its checksum is computed anew over them and
// the input's metadata, so that every input gets past the checksum to the checks of the values
// themselves. "@state" in a value stands for a valid random-generator state (313 numbers),
// which keeps the inputs short. Each input is loaded into fresh objects as rank 1 of a job of 2,
// which reaches every branch of the loader: a checkpoint of 2 ranks continues exactly, one of 1
// or 3 ranks resumes at a recomputed position, and the saved default generator states hold one
// for every rank, one for rank 1, or none for it.
// Asserts: no crash, no undefined behaviour, no hang, and no exception but lockstep::Error; a
// load that is refused changes none of the objects (model, optimiser, scheduler, sampler, the
// default and the named generator); one that succeeds resumes at a position of 0 or more, with
// a learning rate of 0 or more and the sampler at the saved seed.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "fuzz_input.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "lockstep.h"

using lockstep::fuzz::require;

namespace {

using Metadata = std::map<std::string, std::string>;

// The rank that loads, and the size of its job (see the file comment).
constexpr int kRank = 1;
constexpr int kWorldSize = 2;

// `value`'s bytes, so that values that differ in the last bit compare unequal.
std::string bytes_of(double value) { return std::string(reinterpret_cast<const char*>(&value), sizeof value); }

// The objects a run resumes into: Linear(3, 2), SGD with momentum, a LinearLR warm-up, a
// sampler over 8 samples and a named generator, built the same way for every input.
struct Run {
  Run()
      : model(std::make_shared<lockstep::Sequential>(std::make_shared<lockstep::Linear>(3, 2))),
        sgd(model->parameters(), lockstep::SGDOptions(0.1).momentum(0.9)),
        warmup(sgd, 0.5, 1.0, 4),
        sampler(8, kWorldSize, kRank, lockstep::DistributedSamplerOptions().seed(3)),
        augment(5) {}
  lockstep::TrainingState state() {
    lockstep::TrainingState s;
    s.model = model.get();
    s.optimizer = &sgd;
    s.scheduler = &warmup;
    s.sampler = &sampler;
    s.generators = {{"augment", &augment}};
    s.batch_size = 4;
    return s;
  }
  // Everything a load may change, as text and bytes, to compare before and after.
  std::string snapshot() const {
    std::string out;
    for (const auto& [name, t] : model->state_dict()) {
      const lockstep::Tensor c = t.contiguous();
      const size_t bytes = static_cast<size_t>(c.numel()) * lockstep::element_size(c.dtype());
      out.append(static_cast<const char*>(c.data()), bytes);
    }
    const lockstep::OptimizerStateDict optimizer = sgd.state_dict();
    out += "|lr " + bytes_of(sgd.lr()) + " state " + std::to_string(optimizer.state.size());
    for (const auto& [key, value] : optimizer.param_group) {
      out += " " + key + "=";
      if (std::holds_alternative<double>(value)) out += bytes_of(std::get<double>(value));
      if (std::holds_alternative<bool>(value)) out += std::get<bool>(value) ? "true" : "false";
    }
    const lockstep::LRSchedulerStateDict scheduler = warmup.state_dict();
    out += "|scheduler " + std::to_string(scheduler.last_epoch) + " " + bytes_of(scheduler.base_lr);
    for (const auto& [key, value] : scheduler.hyper_parameters) out += " " + key + "=" + bytes_of(value);
    out += "|sampler " + std::to_string(sampler.seed()) + " " + std::to_string(sampler.epoch()) + " " +
           std::to_string(sampler.start_position());
    const auto lock = lockstep::lock_default_generator(nullptr);
    return out + "|" + lockstep::default_generator().get_state() + "|" + augment.get_state();
  }
  std::shared_ptr<lockstep::Module> model;
  lockstep::SGD sgd;
  lockstep::LinearLR warmup;
  lockstep::DistributedSampler sampler;
  lockstep::Generator augment;
};

// The checkpoint's tensors: the model's and SGD's momentum buffers, as a first step leaves them.
const lockstep::StateDict& tensors() {
  static const lockstep::StateDict* const saved = [] {
    const auto numbered = [](const lockstep::Shape& shape, double scale) {
      std::vector<double> values(static_cast<size_t>(lockstep::shape_numel(shape)));
      for (size_t i = 0; i < values.size(); ++i) values[i] = scale * (static_cast<double>(i) - 2.5);
      return lockstep::from_vector(values, shape);
    };
    return new lockstep::StateDict{{"model.0.weight", numbered({2, 3}, 0.25)},
                                   {"model.0.bias", numbered({2}, 0.5)},
                                   {"optimizer.state.0.momentum_buffer", numbered({2, 3}, 0.01)},
                                   {"optimizer.state.1.momentum_buffer", numbered({2}, 0.02)}};
  }();
  return *saved;
}

// A valid state of the generator (Mersenne Twister 19937, 64-bit): its 312 words, here all 1,
// and the position in them. A tenth of the text of a state drawn at random, which the fuzzer
// would spend most of its time parsing.
std::string generator_state() {
  std::string state;
  for (int word = 0; word < 312; ++word) state += "1 ";
  return state + "312";
}

// The input's lines as metadata, "@state" replaced by generator_state().
Metadata parse_metadata(const uint8_t* data, size_t size) {
  static const std::string state = generator_state();
  Metadata metadata = lockstep::fuzz::key_value_lines(data, size);
  for (auto& [key, value] : metadata) {
    for (size_t at = value.find("@state"); at != std::string::npos; at = value.find("@state", at + state.size()))
      value.replace(at, 6, state);
  }
  return metadata;
}

// Loads `path` into fresh objects and checks the properties above.
void load(const std::string& path) {
  Run run;
  lockstep::TrainingState state = run.state();
  const std::string before = run.snapshot();
  lockstep::ResumeInfo info;
  try {
    info = lockstep::load_checkpoint(path, state, lockstep::Device::cpu(), kRank, kWorldSize);
  } catch (const lockstep::Error&) {
    require(run.snapshot() == before, "a refused checkpoint changes nothing");
    return;  // the documented way to refuse a file
  }
  require(info.epoch >= 0 && info.step_in_epoch >= 0 && info.global_step >= 0 && info.samples_in_epoch >= 0,
          "a loaded checkpoint resumes at a position of 0 or more");
  require(info.saved_world_size >= 1, "a loaded checkpoint was saved by 1 rank or more");
  require(std::isfinite(run.sgd.lr()) && run.sgd.lr() >= 0.0, "the restored learning rate is 0 or more");
  require(run.sampler.seed() == info.sampler_seed && run.sampler.epoch() >= 0 && run.sampler.start_position() >= 0,
          "the sampler resumes at the saved seed, at an epoch and position of 0 or more");
  require(info.sampler_restored, "the sampler given is restored (a checkpoint without one is refused)");
  require(!info.restored_optimizer || std::get<double>(info.restored_optimizer->param_group.at("lr")) == run.sgd.lr(),
          "the restored optimiser's learning rate is the one said");
  require(!info.restored_scheduler || info.restored_scheduler->last_epoch == run.warmup.last_epoch(),
          "the restored scheduler's step count is the one said");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Metadata metadata = parse_metadata(data, size);
  metadata[lockstep::kCheckpointChecksumKey] = lockstep::checkpoint_checksum(tensors(), metadata);
  const std::string path = lockstep::fuzz::scratch_folder() + "/checkpoint.safetensors";
  try {
    lockstep::save_safetensors(path, tensors(), metadata);
  } catch (const lockstep::Error&) {
    return 0;  // text that is not UTF-8, which a safetensors header (JSON) cannot hold
  }
  load(path);
  return 0;
}
