/// \file
/// The memory ledger: where a process's tensor memory goes, by what it is for. Every Storage
/// counts its bytes under one category while it lives; code that owns memory of a kind names
/// it, either while allocating (a MemoryCategoryGuard) or afterwards (Storage::set_category):
///
///     parameters              Module::register_parameter, FSDP's and ZeRO's sharded masters
///     gradients               a leaf's .grad (AccumulateGrad), FSDP's gradient shards
///     optimizer state         Optimizer::step's state (momentum, Adam's moments)
///     unsharded parameters    FSDP's whole parameters, gathered for a unit's forward/backward
///     communication buffers   DDP's buckets, the buffers of all-gathers and reduce-scatters
///     activations and other   everything else: activations saved for backward, batches, ...
///
/// The categories add up to every byte of every live tensor on the device, which on the CPU is
/// the allocator's own count (cpu_memory_stats). What the ZeRO paper calls model state is the
/// first four. Chapter 8 prints the ledger per rank beside the formulas for each sharding mode.
///
/// The counts are per device and process-wide (every thread's tensors), kept under one mutex:
/// a few nanoseconds per allocation against the allocation's own cost.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/device.h"

namespace lockstep {

/// What a block of tensor memory is for (see the file comment).
enum class MemoryCategory : int {
  parameters,
  gradients,
  optimizer_state,
  unsharded_parameters,
  communication_buffers,
  activations_and_other,
};

/// The number of categories.
constexpr int kMemoryCategoryCount = 6;

/// "parameters", "gradients", "optimizer state", "unsharded parameters", "communication
/// buffers" or "activations and other".
const char* memory_category_name(MemoryCategory category);

/// The ledger of one device, in bytes.
struct MemoryLedger {
  std::array<int64_t, kMemoryCategoryCount> current{};  ///< Live bytes by category (index: the enum's value).
  std::array<int64_t, kMemoryCategoryCount> peak{};     ///< Each category's highest count since the last reset.
  int64_t total = 0;             ///< Live bytes, all categories.
  int64_t peak_total = 0;        ///< The highest total since the last reset.
  int64_t model_state = 0;       ///< Live parameters + gradients + optimizer state + unsharded parameters.
  int64_t peak_model_state = 0;  ///< The highest model_state since the last reset.

  /// current[category].
  int64_t operator[](MemoryCategory category) const { return current[static_cast<int>(category)]; }
};

/// The ledger of `device` now.
MemoryLedger memory_ledger(Device device);

/// Restarts every peak of `device`'s ledger from its current counts (as
/// torch.cuda.reset_peak_memory_stats), to measure the peaks of one step.
void reset_memory_ledger_peaks(Device device);

/// The category new Storage counts under on this thread (activations_and_other unless a
/// MemoryCategoryGuard says otherwise).
MemoryCategory current_memory_category();

/// Counts the storage allocated on this thread while it lives under `category`.
class MemoryCategoryGuard {
 public:
  /// From now until destruction, new storage of this thread is `category`'s.
  explicit MemoryCategoryGuard(MemoryCategory category);
  /// Gives back the enclosing scope's category.
  ~MemoryCategoryGuard();
  MemoryCategoryGuard(const MemoryCategoryGuard&) = delete;             ///< One scope, one object.
  MemoryCategoryGuard& operator=(const MemoryCategoryGuard&) = delete;  ///< One scope, one object.

 private:
  MemoryCategory previous_;
};

/// One point of a memory timeline: a device's ledger right after a change.
struct MemorySample {
  double seconds = 0;  ///< Since start_memory_timeline.
  std::array<int64_t, kMemoryCategoryCount> bytes{};  ///< Live bytes by category.
};

/// Starts recording a sample of `device`'s ledger at every change (one device at a time).
void start_memory_timeline(Device device);

/// Stops recording and returns the samples since start_memory_timeline.
std::vector<MemorySample> stop_memory_timeline();

namespace detail {
/// Moves `nbytes` (negative: takes them away) into `category` of `device`'s ledger. Storage
/// calls it when it allocates, frees, resizes or changes category.
void count_memory(Device device, MemoryCategory category, int64_t nbytes);
}  // namespace detail

}  // namespace lockstep
