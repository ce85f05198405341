// DataLoader with pin_memory(true) on a GPU machine: every batch arrives in pinned host memory,
// from the worker thread and from the calling thread alike, and a non-blocking copy of it to the
// GPU carries exactly the values of the unpinned batch.
#include <gtest/gtest.h>

#include <vector>

#include "../common/busy_gpu.h"
#include "gpu_test_util.h"
#include "lockstep.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// 50 random samples of shape (3, 4) with targets 0..49, so values and order are both checked.
std::shared_ptr<TensorDataset> random_dataset() {
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < 50; ++i) targets.push_back(i);
  return std::make_shared<TensorDataset>(random_cpu({50, 3, 4}, 11), from_vector(targets, {50}));
}

}  // namespace

TEST(DataLoaderPinned, BatchesArePinnedAndCopyToTheGpuUnchanged) {
  const auto data = random_dataset();
  // Prefetch 2 pins on the worker thread, prefetch 0 on the calling thread. A batch size that
  // does not divide 50 checks the short last batch too.
  for (int64_t prefetch : {2, 0}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    DataLoader pinned(data, DataLoaderOptions(16).prefetch(prefetch).pin_memory(true));
    DataLoader pageable(data, DataLoaderOptions(16).prefetch(prefetch));
    std::vector<Batch> expected;
    for (const Batch& batch : pageable) {
      EXPECT_FALSE(batch.inputs.is_pinned());
      expected.push_back(batch);
    }
    size_t b = 0;
    for (const Batch& batch : pinned) {
      ASSERT_LT(b, expected.size());
      EXPECT_TRUE(batch.inputs.is_pinned());
      EXPECT_TRUE(batch.targets.is_pinned());
      // The copies are only queued; reading them back on the CPU waits for them. Exact
      // equality: a copy moves bytes, it computes nothing.
      const Tensor inputs = batch.inputs.to(gpu(), true), targets = batch.targets.to(gpu(), true);
      EXPECT_EQ(inputs.device(), gpu());
      expect_close(expected[b].inputs, inputs, 0.0, 0.0, "inputs of batch " + std::to_string(b));
      EXPECT_EQ(targets.to(Device::cpu()).to_vector<int64_t>(), expected[b].targets.to_vector<int64_t>());
      ++b;
    }
    EXPECT_EQ(b, expected.size());
  }
}

// The loop that chapter 2 runs: many batches sent without waiting, the pinned buffers released
// as the loop advances. The copies wait behind milliseconds of products queued first, so every
// copy is still in flight when the worker pins the next batches, and a released buffer reused
// before its copy ran would change what that copy sends: each sum must still be its batch's.
TEST(DataLoaderPinned, NonBlockingCopiesOfManyBatchesKeepTheirValues) {
  const auto data = random_dataset();
  DataLoader pinned(data, DataLoaderOptions(4).pin_memory(true));
  std::vector<Tensor> sums_on_gpu;
  queue_busy_work(gpu());
  for (const Batch& batch : pinned) sums_on_gpu.push_back(sum(batch.inputs.to(gpu(), true)));
  DataLoader pageable(data, DataLoaderOptions(4));
  size_t b = 0;
  for (const Batch& batch : pageable) {
    ASSERT_LT(b, sums_on_gpu.size());
    // Sums of 48 values in [-1, 1): the GPU's reduction order differs from the CPU's.
    expect_close(sum(batch.inputs), sums_on_gpu[b], 1e-5, 1e-5, "sum of batch " + std::to_string(b));
    ++b;
  }
  EXPECT_EQ(b, sums_on_gpu.size());
}
