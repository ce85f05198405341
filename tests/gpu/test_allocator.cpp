// The caching allocator: freed blocks are reused instead of going back to cudaMalloc, and the
// statistics say so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../unit/test_util.h"
#include "gpu_test_util.h"

namespace lockstep::test {
namespace {

TEST(CachingAllocator, ReusesAFreedBlockOfTheSameSize) {
  SKIP_WITHOUT_CACHING();
  const Device device = gpu();
  { const Tensor warm = empty({1 << 20}, TensorOptions().device(device)); }
  const cuda::MemoryStats before = cuda::memory_stats(device);
  void* first = nullptr;
  {
    const Tensor t = empty({1 << 20}, TensorOptions().device(device));
    first = t.data();
  }
  const Tensor again = empty({1 << 20}, TensorOptions().device(device));
  const cuda::MemoryStats after = cuda::memory_stats(device);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(after.cuda_mallocs, before.cuda_mallocs);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 2);
}

TEST(CachingAllocator, RefusesToFreeAPointerItDidNotHandOut) {
  int not_from_the_allocator = 0;
  expect_error([&] { cuda::caching_allocator(gpu().index()).deallocate(&not_from_the_allocator, sizeof not_from_the_allocator); },
               "was asked to free a pointer it did not hand out");
}

TEST(CachingAllocator, CountsAllocatedReservedAndPeakBytes) {
  SKIP_WITHOUT_CACHING();
  const Device device = gpu();
  cuda::reset_peak_memory_stats(device);
  const cuda::MemoryStats start = cuda::memory_stats(device);
  {
    // 3 MiB rounds up to the 2 MiB size classes: 4 MiB.
    const Tensor big = empty({3 << 18}, TensorOptions().device(device));
    const cuda::MemoryStats during = cuda::memory_stats(device);
    EXPECT_EQ(during.allocated_bytes, start.allocated_bytes + (4 << 20));
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  }
  const cuda::MemoryStats end = cuda::memory_stats(device);
  EXPECT_EQ(end.allocated_bytes, start.allocated_bytes);
  EXPECT_EQ(end.peak_allocated_bytes, start.allocated_bytes + (4 << 20));
  // The freed block stays reserved until the cache is emptied.
  EXPECT_GE(end.reserved_bytes, end.allocated_bytes + (4 << 20));
  cuda::empty_cache(device);
  EXPECT_EQ(cuda::memory_stats(device).reserved_bytes, cuda::memory_stats(device).allocated_bytes);
}

TEST(CachingAllocator, ATrainingStepAllocatesNothingNewAfterTheFirst) {
  SKIP_WITHOUT_CACHING();
  const Device device = gpu();
  Linear layer(64, 32);
  layer.to(device);
  SGD optimizer(layer.parameters(), SGDOptions(0.1).momentum(0.9));
  const Tensor x = random_cpu({16, 64}, 11).to(device);
  auto step = [&] {
    optimizer.zero_grad();
    sum(relu(layer.forward(x))).backward();
    optimizer.step();
  };
  step();
  step();
  const int64_t mallocs = cuda::memory_stats(device).cuda_mallocs;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(cuda::memory_stats(device).cuda_mallocs, mallocs);
}

TEST(CachingAllocator, ZeroByteTensorsGetDistinctBlocks) {
  const Tensor a = empty({0}, TensorOptions().device(gpu()));
  const Tensor b = empty({0}, TensorOptions().device(gpu()));
  EXPECT_NE(a.storage()->data(), b.storage()->data());
}

// A request no GPU can meet (1 TiB) is an error of kind OutOfMemory, as PyTorch raises
// torch.cuda.OutOfMemoryError, which says what a caller can do; the allocator stays usable.
TEST(CachingAllocator, ARequestTooLargeIsOutOfMemory) {
  const Device device = gpu();
  expect_error([&] { empty({int64_t{1} << 38}, TensorOptions().device(device)); }, ErrorKind::OutOfMemory,
               device.str() + " is out of memory: tried to allocate ");
  expect_error([&] { empty({int64_t{1} << 38}, TensorOptions().device(device)); }, ErrorKind::OutOfMemory,
               "MiB already in use by tensors; free tensors, or use smaller batches or a smaller model");
  EXPECT_EQ(sum(ones({4}, TensorOptions().device(device))).item(), 4.0);
}

}  // namespace
}  // namespace lockstep::test
