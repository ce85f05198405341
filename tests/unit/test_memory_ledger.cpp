// The memory ledger: every live tensor's bytes under one category, the categories adding up to
// the CPU allocator's own count at every moment; guards, set_category and Storage::resize move
// bytes between categories; peaks and the timeline; what the library's owners label (a module's
// parameters, a leaf's gradient, an optimiser's state).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;

namespace {

MemoryLedger cpu_ledger() { return memory_ledger(Device::cpu()); }

// The ledger's categories add up to its total, and the total is what the allocator handed out.
void expect_consistent(const char* when) {
  const MemoryLedger ledger = cpu_ledger();
  int64_t sum = 0;
  for (int64_t bytes : ledger.current) sum += bytes;
  EXPECT_EQ(sum, ledger.total) << when;
  EXPECT_EQ(ledger.total, cpu_memory_stats().allocated_bytes) << when;
}

}  // namespace

TEST(MemoryLedger, CategoriesAddUpToTheAllocatorsCount) {
  expect_consistent("at the start");
  const MemoryLedger before = cpu_ledger();
  Tensor other = empty({100});  // 400 bytes of activations and other
  Tensor moments;
  {
    const MemoryCategoryGuard guard(MemoryCategory::optimizer_state);
    moments = zeros({50});  // 200 bytes of optimiser state
  }
  const MemoryLedger during = cpu_ledger();
  EXPECT_EQ(during[MemoryCategory::activations_and_other] - before[MemoryCategory::activations_and_other], 400);
  EXPECT_EQ(during[MemoryCategory::optimizer_state] - before[MemoryCategory::optimizer_state], 200);
  EXPECT_EQ(during.model_state - before.model_state, 200);
  expect_consistent("with two tensors");
  // Claimed by an owner: the bytes move; freed: they leave.
  other.storage()->set_category(MemoryCategory::communication_buffers);
  EXPECT_EQ(cpu_ledger()[MemoryCategory::communication_buffers] - before[MemoryCategory::communication_buffers], 400);
  other.storage()->resize(0);
  EXPECT_EQ(cpu_ledger()[MemoryCategory::communication_buffers], before[MemoryCategory::communication_buffers]);
  expect_consistent("after a resize to nothing");
  moments = Tensor();
  other = Tensor();
  EXPECT_EQ(cpu_ledger().total, before.total);
  expect_consistent("at the end");
}

TEST(MemoryLedger, PeaksAndTimeline) {
  reset_memory_ledger_peaks(Device::cpu());
  const int64_t start = cpu_ledger().total;
  start_memory_timeline(Device::cpu());
  {
    const Tensor a = empty({1000});  // +4,000 bytes, freed at the end of the scope
  }
  const std::vector<MemorySample> samples = stop_memory_timeline();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].bytes[static_cast<int>(MemoryCategory::activations_and_other)] -
                samples[1].bytes[static_cast<int>(MemoryCategory::activations_and_other)], 4000);
  EXPECT_LE(samples[0].seconds, samples[1].seconds);
  EXPECT_EQ(cpu_ledger().peak_total, start + 4000);
  EXPECT_EQ(cpu_ledger().total, start);
}

TEST(MemoryLedger, OwnersLabelTheirMemory) {
  const MemoryLedger before = cpu_ledger();
  auto layer = std::make_shared<Linear>(10, 4);  // 44 parameters
  EXPECT_EQ(cpu_ledger()[MemoryCategory::parameters] - before[MemoryCategory::parameters], 44 * 4);
  Adam opt(layer->parameters(), AdamOptions(0.01));
  sum((*layer)(ones({2, 10}))).backward();
  EXPECT_EQ(cpu_ledger()[MemoryCategory::gradients] - before[MemoryCategory::gradients], 44 * 4);
  opt.step();
  // Adam: two moments per element and a 0-d step count per parameter.
  EXPECT_EQ(cpu_ledger()[MemoryCategory::optimizer_state] - before[MemoryCategory::optimizer_state], 44 * 8 + 2 * 4);
  EXPECT_EQ(memory_category_name(MemoryCategory::activations_and_other), std::string("activations and other"));
  expect_consistent("after a step");
}
