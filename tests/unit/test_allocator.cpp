// The CPU allocator: large blocks are cached by size class and handed out again, small ones
// go straight back to malloc, and empty_cache returns everything.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep.h"

using namespace lockstep;

TEST(CpuAllocator, SizeClassesRoundUpTo512BytesThenTo2MiB) {
  EXPECT_EQ(size_class(0), 512u);
  EXPECT_EQ(size_class(512), 512u);
  EXPECT_EQ(size_class(513), 1024u);
  EXPECT_EQ(size_class(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(size_class((size_t(1) << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(size_class((size_t(2) << 20) + 1), size_t(4) << 20);
}

TEST(CpuAllocator, HandsALargeBlockBackOutForTheSameSizeClass) {
  cpu_empty_cache();
  Allocator& allocator = cpu_allocator();
  const size_t nbytes = (size_t(3) << 20) + 100;  // class: 4 MiB
  void* first = allocator.allocate(nbytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % kCpuAlignment, 0u);
  allocator.deallocate(first, nbytes);
  EXPECT_EQ(cpu_cached_bytes(), size_t(4) << 20);

  // A request of another size in the same class gets the very same block, and it fits.
  const size_t smaller = (size_t(3) << 20) + 8;
  void* second = allocator.allocate(smaller);
  EXPECT_EQ(second, first);
  EXPECT_EQ(cpu_cached_bytes(), 0u);
  static_cast<char*>(second)[(size_t(4) << 20) - 1] = 1;  // the whole class is usable
  allocator.deallocate(second, smaller);
  cpu_empty_cache();
  EXPECT_EQ(cpu_cached_bytes(), 0u);
}

TEST(CpuAllocator, SmallBlocksAreNotCached) {
  cpu_empty_cache();
  Allocator& allocator = cpu_allocator();
  void* small = allocator.allocate(1000);
  allocator.deallocate(small, 1000);
  EXPECT_EQ(cpu_cached_bytes(), 0u);
}

TEST(CpuAllocator, AFreedTensorsStorageIsReusedByTheNextTensorOfItsSize) {
  cpu_empty_cache();
  const void* first = nullptr;
  {
    Tensor a = zeros({512, 512});  // 1 MiB of f32
    first = a.data_ptr<float>();
  }
  EXPECT_EQ(cpu_cached_bytes(), size_t(1) << 20);
  Tensor b = ones({512, 512});
  EXPECT_EQ(b.data_ptr<float>(), first);
  EXPECT_EQ(sum(b).item(), 512.0 * 512.0);  // ones() wrote every element of the reused block
  EXPECT_EQ(cpu_cached_bytes(), 0u);
}

// A tensor larger than any machine's memory is an error naming its size, not std::bad_alloc:
// randn draws straight into the tensor the allocator gives, or refuses.
TEST(CpuAllocator, ATensorBeyondMemoryIsAnErrorThatSaysSo) {
  const int64_t n = int64_t(1) << 22;  // n x n f32: 64 TiB
  for (const auto& make : std::vector<std::function<Tensor()>>{[&] { return empty({n, n}); },
                                                                 [&] { return randn({n, n}); }}) {
    try {
      make();
      FAIL() << "a 64 TiB tensor was allocated";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cpu allocator: out of memory: cannot allocate 70368744177664 bytes"),
                std::string::npos)
          << e.what();
    }
  }
}
