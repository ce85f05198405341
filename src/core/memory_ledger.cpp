#include "core/memory_ledger.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "core/error.h"

namespace lockstep {

namespace {

// The CPU, then CUDA devices 0, 1, ...
constexpr int kLedgerSlots = 17;

struct LedgerState {
  std::mutex mutex;
  std::array<MemoryLedger, kLedgerSlots> ledgers;
  // The timeline being recorded, if any.
  int timeline_slot = -1;
  std::chrono::steady_clock::time_point timeline_start;
  std::vector<MemorySample> timeline;
};

LedgerState& state() {
  // Never destroyed: storages in static memory are freed after main returns.
  static auto* ledger = new LedgerState();
  return *ledger;
}

int slot_of(Device device) {
  if (device.is_cpu()) return 0;
  LOCKSTEP_CHECK(device.index() + 1 < kLedgerSlots, "memory ledger: ", device, " is beyond the ", kLedgerSlots - 1,
                 " CUDA devices it counts");
  return device.index() + 1;
}

bool is_model_state(MemoryCategory category) {
  return category == MemoryCategory::parameters || category == MemoryCategory::gradients ||
         category == MemoryCategory::optimizer_state || category == MemoryCategory::unsharded_parameters;
}

thread_local MemoryCategory thread_category = MemoryCategory::activations_and_other;

}  // namespace

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::parameters: return "parameters";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::optimizer_state: return "optimizer state";
    case MemoryCategory::unsharded_parameters: return "unsharded parameters";
    case MemoryCategory::communication_buffers: return "communication buffers";
    case MemoryCategory::activations_and_other: return "activations and other";
  }
  return "?";
}

MemoryLedger memory_ledger(Device device) {
  LedgerState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return s.ledgers[slot_of(device)];
}

void reset_memory_ledger_peaks(Device device) {
  LedgerState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  MemoryLedger& ledger = s.ledgers[slot_of(device)];
  ledger.peak = ledger.current;
  ledger.peak_total = ledger.total;
  ledger.peak_model_state = ledger.model_state;
}

MemoryCategory current_memory_category() { return thread_category; }

MemoryCategoryGuard::MemoryCategoryGuard(MemoryCategory category) : previous_(thread_category) {
  thread_category = category;
}

MemoryCategoryGuard::~MemoryCategoryGuard() { thread_category = previous_; }

void start_memory_timeline(Device device) {
  LedgerState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.timeline_slot = slot_of(device);
  s.timeline_start = std::chrono::steady_clock::now();
  s.timeline.clear();
}

std::vector<MemorySample> stop_memory_timeline() {
  LedgerState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.timeline_slot = -1;
  return std::move(s.timeline);
}

namespace detail {

void count_memory(Device device, MemoryCategory category, int64_t nbytes) {
  if (nbytes == 0) return;
  LedgerState& s = state();
  const int slot = slot_of(device);
  const int c = static_cast<int>(category);
  const std::lock_guard<std::mutex> lock(s.mutex);
  MemoryLedger& ledger = s.ledgers[slot];
  ledger.current[c] += nbytes;
  ledger.total += nbytes;
  if (is_model_state(category)) ledger.model_state += nbytes;
  ledger.peak[c] = std::max(ledger.peak[c], ledger.current[c]);
  ledger.peak_total = std::max(ledger.peak_total, ledger.total);
  ledger.peak_model_state = std::max(ledger.peak_model_state, ledger.model_state);
  if (slot == s.timeline_slot) {
    const std::chrono::duration<double> since = std::chrono::steady_clock::now() - s.timeline_start;
    s.timeline.push_back(MemorySample{since.count(), ledger.current});
  }
}

}  // namespace detail

}  // namespace lockstep
