// TensorDataset, samplers and the DataLoader: batching, epochs, drop_last, prefetching on a
// background thread (same batches, bounded queue, early exit, exceptions from the dataset).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// n samples of shape (2): sample i is (10 i, 10 i + 1) with target i, so a batch says which
// samples it holds.
std::shared_ptr<TensorDataset> numbered(int64_t n) {
  std::vector<double> values;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(10.0 * i);
    values.push_back(10.0 * i + 1);
    targets.push_back(i);
  }
  return std::make_shared<TensorDataset>(from_vector(values, {n, 2}), from_vector(targets, {n}));
}

// Every batch of one epoch, as (inputs, targets) vectors.
struct Epoch {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<int64_t>> targets;
};
Epoch run_epoch(DataLoader& loader) {
  Epoch epoch;
  for (const Batch& batch : loader) {
    epoch.inputs.push_back(batch.inputs.to_vector<float>());
    epoch.targets.push_back(batch.targets.to_vector<int64_t>());
  }
  return epoch;
}

// A dataset that counts get_batch calls, may wait in each, and throws for batches that hold
// `bad_index`.
class ProbeDataset : public Dataset {
 public:
  ProbeDataset(int64_t n, int64_t bad_index = -1) : inner_(numbered(n)), bad_index_(bad_index) {}
  int64_t size() const override { return inner_->size(); }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    ++calls;
    LOCKSTEP_CHECK(std::find(indices.begin(), indices.end(), bad_index_) == indices.end(), "ProbeDataset: sample ",
                   bad_index_, " is corrupt");
    return inner_->get_batch(indices);
  }
  mutable std::atomic<int> calls{0};

 private:
  std::shared_ptr<TensorDataset> inner_;
  int64_t bad_index_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// TensorDataset

TEST(TensorDataset, GetBatchGathersRowsInTheGivenOrder) {
  const auto data = numbered(5);
  const Batch batch = data->get_batch({3, 0, 3});
  EXPECT_EQ(batch.inputs.shape(), (Shape{3, 2}));
  EXPECT_EQ(batch.inputs.to_vector<float>(), (std::vector<float>{30, 31, 0, 1, 30, 31}));
  EXPECT_EQ(batch.targets.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 3}));
  // The batch is a copy: writing to it leaves the dataset alone.
  batch.inputs.fill_(-1.0);
  EXPECT_EQ(data->inputs()[3].to_vector<float>(), (std::vector<float>{30, 31}));
  expect_error([&] { data->get_batch({1, 5}); }, "TensorDataset::get_batch: index 5 is out of range for a dataset of 5 samples");
  expect_error([&] { data->get_batch({-1}); }, "index -1 is out of range");
}

TEST(TensorDataset, GathersFromNonContiguousInputs) {
  // inputs (3, 2) seen through a transpose: rows are (0, 3), (1, 4), (2, 5).
  const Tensor inputs = arange(0, 6).reshape({2, 3}).t();
  const TensorDataset data(inputs, from_vector(std::vector<int64_t>{0, 1, 2}, {3}));
  EXPECT_EQ(data.get_batch({2, 1}).inputs.to_vector<float>(), (std::vector<float>{2, 5, 1, 4}));
}

TEST(TensorDataset, CountsClassesAndChecksItsInputs) {
  EXPECT_EQ(numbered(4)->num_classes(), 4);  // labels 0..3, no names: largest + 1
  const TensorDataset named(zeros({2, 1}), from_vector(std::vector<int64_t>{0, 1}, {2}), {"a", "b", "c"});
  EXPECT_EQ(named.num_classes(), 3);
  expect_error([] { TensorDataset(zeros({3, 2}), from_vector(std::vector<int64_t>{0, 1}, {2})); },
               "TensorDataset: expected as many targets as inputs, got 3 inputs and 2 targets");
  expect_error([] { TensorDataset(zeros({2, 2}), zeros({2})); }, "expected targets of shape (N) and dtype i64, got [2] and f32");
  expect_error([] { TensorDataset(zeros({2, 2}), from_vector(std::vector<int64_t>{0, -2}, {2})); }, "expected class labels >= 0, got -2");
  expect_error([] { TensorDataset(zeros({2, 2}), from_vector(std::vector<int64_t>{0, 2}, {2}), {"a", "b"}); },
               "label 2 is out of range for 2 class names");
}

TEST(TensorDataset, PixelsToFloatIsToTensorThenNormalize) {
  // pixels (1, 2, 1, 2): channel 0 holds 0 and 255, channel 1 holds 51 and 102.
  const Tensor pixels = from_vector({0, 255, 51, 102}, {1, 2, 1, 2}, TensorOptions().dtype(DType::u8));
  EXPECT_EQ(pixels_to_float(pixels).to_vector<float>(), (std::vector<float>{0.0f, 1.0f, 0.2f, 0.4f}));
  const std::vector<float> x = pixels_to_float(pixels, {0.5f, 0.25f}, {0.5f, 2.0f}).to_vector<float>();
  EXPECT_FLOAT_EQ(x[0], -1.0f);   // (0 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(x[1], 1.0f);    // (1 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(x[2], -0.025f);  // (0.2 - 0.25) / 2
  EXPECT_FLOAT_EQ(x[3], 0.075f);  // (0.4 - 0.25) / 2
  expect_error([&] { pixels_to_float(pixels, {0.5f}, {0.5f}); }, "expected one mean and one std per channel (2), got 1 means");
  expect_error([] { pixels_to_float(zeros({1, 1, 2, 2})); }, "expected u8 pixels of shape (N, C, H, W)");
}

// ---------------------------------------------------------------------------------------------
// Samplers

TEST(Sampler, SequentialVisitsEveryIndexInOrder) {
  SequentialSampler sampler(5);
  EXPECT_EQ(sampler.size(), 5);
  EXPECT_EQ(sampler.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(sampler.indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(SequentialSampler(0).indices().empty());
}

TEST(Sampler, RandomGivesANewPermutationEachEpochReproducibly) {
  RandomSampler a(100, 42), b(100, 42), c(100, 7);
  const std::vector<int64_t> a1 = a.indices(), a2 = a.indices();
  // A permutation of 0..99.
  std::vector<int64_t> sorted = a1;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(sorted[i], i);
  // Epochs differ; the same seed replays the same epochs; another seed does not.
  EXPECT_NE(a1, a2);
  EXPECT_EQ(b.indices(), a1);
  EXPECT_EQ(b.indices(), a2);
  EXPECT_NE(c.indices(), a1);
}

TEST(Sampler, RandpermDrawsEveryPermutationEquallyOften) {
  // All 6 orders of 3 items, 6000 draws: about 1000 each (5 standard deviations ~ 150).
  // A classic Fisher-Yates slip (j drawn from 0..i-1) only ever yields the 2 cyclic orders.
  Generator generator(3);
  std::map<std::vector<int64_t>, int> counts;
  for (int draw = 0; draw < 6000; ++draw) ++counts[randperm(3, generator)];
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) EXPECT_NEAR(count, 1000, 150);
}

// ---------------------------------------------------------------------------------------------
// DataLoader

TEST(DataLoader, YieldsEverySampleOncePerEpoch) {
  const auto data = numbered(10);
  DataLoader loader(data, DataLoaderOptions(3).sampler(std::make_shared<RandomSampler>(10, 1)));
  EXPECT_EQ(loader.size(), 4);
  std::vector<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    std::vector<int64_t> sizes;
    for (const Batch& batch : loader) {
      sizes.push_back(batch.targets.size(0));
      const std::vector<int64_t> targets = batch.targets.to_vector<int64_t>();
      const std::vector<float> inputs = batch.inputs.to_vector<float>();
      // Each row still belongs to its target.
      for (size_t r = 0; r < targets.size(); ++r) EXPECT_EQ(inputs[2 * r], 10.0f * targets[r]);
      seen.insert(seen.end(), targets.begin(), targets.end());
    }
    EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 3, 1}));  // the last batch is smaller
    orders.push_back(seen);
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  EXPECT_NE(orders[0], orders[1]);  // a new order each epoch
}

TEST(DataLoader, SequentialByDefaultAndDropLastDropsTheShortBatch) {
  const auto data = numbered(7);
  DataLoader keep(data, DataLoaderOptions(3));
  EXPECT_EQ(keep.size(), 3);
  EXPECT_EQ(run_epoch(keep).targets, (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  DataLoader drop(data, DataLoaderOptions(3).drop_last(true));
  EXPECT_EQ(drop.size(), 2);
  EXPECT_EQ(run_epoch(drop).targets, (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}}));
  // A batch larger than the dataset: one short batch, or none with drop_last.
  DataLoader big(data, DataLoaderOptions(8).drop_last(true));
  EXPECT_EQ(big.size(), 0);
  EXPECT_TRUE(run_epoch(big).targets.empty());
  DataLoader exact(numbered(6), DataLoaderOptions(3));
  EXPECT_EQ(exact.size(), 2);
  EXPECT_EQ(run_epoch(exact).targets.size(), 2u);
}

TEST(DataLoader, PrefetchOnAndOffGiveTheSameBatches) {
  const auto data = numbered(50);
  std::vector<Epoch> runs;
  for (int64_t prefetch : {0, 1, 2, 5}) {
    DataLoader loader(data, DataLoaderOptions(4).prefetch(prefetch).sampler(std::make_shared<RandomSampler>(50, 9)));
    for (int epoch = 0; epoch < 3; ++epoch) runs.push_back(run_epoch(loader));
  }
  for (size_t r = 3; r < runs.size(); ++r) {
    EXPECT_EQ(runs[r].inputs, runs[r % 3].inputs) << "run " << r;
    EXPECT_EQ(runs[r].targets, runs[r % 3].targets) << "run " << r;
  }
}

TEST(DataLoader, PrefetchRunsAheadByAtMostTheQueueSize) {
  const auto data = std::make_shared<ProbeDataset>(100);
  DataLoader loader(data, DataLoaderOptions(1).prefetch(2));
  auto it = loader.begin();
  EXPECT_EQ(it->targets.item<int64_t>(), 0);
  // The worker prepares batch 0 (taken), 1 and 2 (queued), then 3, which waits for room.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (data->calls < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(data->calls, 4);
  ++it;
  EXPECT_EQ(it->targets.item<int64_t>(), 1);
}

TEST(DataLoader, LeavingALoopEarlyThenRestartingOrDestroyingDoesNotHang) {
  // A hang would block the whole test program, so the scenario runs on its own thread and a
  // timeout ends the program with a message instead.
  auto scenario = std::async(std::launch::async, [] {
    const auto data = numbered(100);
    auto loader = std::make_unique<DataLoader>(data, DataLoaderOptions(1).prefetch(2));
    for (const Batch& batch : *loader) {
      if (batch.targets.item<int64_t>() == 3) break;
    }
    // A new epoch starts from the beginning, not where the last one stopped.
    int64_t first = -1;
    for (const Batch& batch : *loader) {
      first = batch.targets.item<int64_t>();
      break;
    }
    loader.reset();  // joins the worker, which is waiting for room in a full queue
    return first;
  });
  if (scenario.wait_for(std::chrono::seconds(30)) == std::future_status::timeout) {
    std::fprintf(stderr, "DataLoader: leaving a loop early hung for 30 s (worker thread never joined)\n");
    std::_Exit(1);
  }
  EXPECT_EQ(scenario.get(), 0);
}

TEST(DataLoader, AnExceptionInGetBatchReachesTheLoop) {
  for (int64_t prefetch : {0, 2}) {
    const auto data = std::make_shared<ProbeDataset>(10, /*bad_index=*/7);
    DataLoader loader(data, DataLoaderOptions(3).prefetch(prefetch));
    std::vector<int64_t> seen;
    expect_error(
        [&] {
          for (const Batch& batch : loader) {
            for (int64_t t : batch.targets.to_vector<int64_t>()) seen.push_back(t);
          }
        },
        "ProbeDataset: sample 7 is corrupt");
    // The batches before the bad one arrived, in order.
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5})) << "prefetch " << prefetch;
    // A failure in the very first batch comes out of begin().
    const auto first_bad = std::make_shared<ProbeDataset>(10, /*bad_index=*/0);
    DataLoader failing(first_bad, DataLoaderOptions(3).prefetch(prefetch));
    expect_error([&] { failing.begin(); }, "sample 0 is corrupt");
  }
}

TEST(DataLoader, RejectsBadOptions) {
  const auto data = numbered(4);
  expect_error([&] { DataLoader(data, DataLoaderOptions(0)); }, "DataLoader: expected batch_size >= 1, got 0");
  expect_error([&] { DataLoader(data, DataLoaderOptions(2).prefetch(-1)); }, "DataLoader: expected prefetch >= 0 batches, got -1");
  expect_error([&] { DataLoader(nullptr, DataLoaderOptions(2)); }, "DataLoader: expected a dataset, got a null pointer");
}

// Without a GPU, pinning is refused up front with a reason, not left to fail (or to be quietly
// ignored) on the worker thread. On a GPU machine tests/gpu/test_data_loader_pinned.cpp checks
// the pinned batches themselves.
TEST(DataLoader, PinMemoryWithoutAGpuIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU: the gpu tests cover pin_memory there";
  const auto data = numbered(4);
  const std::string reason = built_with_cuda() ? "and this machine has none" : "and Lockstep was built without CUDA";
  expect_error([&] { DataLoader(data, DataLoaderOptions(2).pin_memory(true)); },
               "DataLoader: pin_memory(true) needs a CUDA device, " + reason);
  // Off (the default) is what CPU training uses.
  EXPECT_FALSE(DataLoaderOptions(2).pin_memory());
  DataLoader pageable(data, DataLoaderOptions(2).pin_memory(false));
  for (const Batch& batch : pageable) EXPECT_FALSE(batch.inputs.is_pinned());
}
