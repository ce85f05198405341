#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/cuda/memory.h"
#include "core/error.h"

namespace lockstep {

size_t size_class(size_t nbytes) {
  constexpr size_t kSmallQuantum = 512;               // up to 1 MiB: 512-byte steps
  constexpr size_t kLargeThreshold = size_t(1) << 20;  // 1 MiB
  constexpr size_t kLargeQuantum = size_t(2) << 20;    // above: 2 MiB steps
  const size_t quantum = nbytes <= kLargeThreshold ? kSmallQuantum : kLargeQuantum;
  return (std::max<size_t>(nbytes, 1) + quantum - 1) / quantum * quantum;
}

namespace {

// Why large blocks are kept: glibc gives a large block its own mapping from the kernel, and on
// free() hands the pages straight back (it learns to keep blocks of up to 32 MiB in its heap
// instead, but never larger ones). The next batch asks for the same sizes again, and the
// kernel must find, zero and map every page anew, one page fault per page, for every batch of
// a training or evaluation loop.
// Smaller blocks come from malloc's own free lists, which reuse them without the kernel, so
// they are left to it.
constexpr size_t kCachedFrom = size_t(128) << 10;  // 128 KiB, glibc's default mmap threshold

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    void* ptr = take(nbytes);
    count(static_cast<int64_t>(nbytes));
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    count(-static_cast<int64_t>(nbytes));
    give_back(ptr, nbytes);
  }

  Device device() const override { return Device::cpu(); }

  CpuMemoryStats stats() {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_blocks_) {
      for (void* ptr : blocks) std::free(ptr);
    }
    free_blocks_.clear();
    cached_bytes_ = 0;
  }

 private:
  void count(int64_t nbytes) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.allocated_bytes += nbytes;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  }

  void* take(size_t nbytes) {
    if (nbytes < kCachedFrom) return allocate_from_malloc(nbytes);
    // A cached block of this size class: take it back (after the first step, always).
    const size_t size = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& free_list = free_blocks_[size];
      if (!free_list.empty()) {
        void* ptr = free_list.back();
        free_list.pop_back();
        cached_bytes_ -= size;
        return ptr;
      }
    }
    return allocate_from_malloc(size);
  }

  // Back onto its size class's free list (a large block) or to malloc.
  void give_back(void* ptr, size_t nbytes) {
    if (nbytes < kCachedFrom) {
      std::free(ptr);
      return;
    }
    const size_t size = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    free_blocks_[size].push_back(ptr);
    cached_bytes_ += size;
  }

  static void* allocate_from_malloc(size_t nbytes) {
    // aligned_alloc wants a size that is a multiple of the alignment (and > 0 to be unique).
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* ptr = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
    if (ptr == nullptr) {
      LOCKSTEP_FAIL("cpu allocator: out of memory: cannot allocate ", nbytes, " bytes (",
                    static_cast<double>(nbytes) / double(1 << 30), " GiB) for a tensor; use smaller tensors");
    }
    return ptr;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // size class -> cached blocks
  size_t cached_bytes_ = 0;
  std::mutex stats_mutex_;
  CpuMemoryStats stats_;
};

CpuAllocator& cpu_allocator_instance() {
  // Never destroyed: tensors in static storage may still free their blocks at exit.
  static auto* allocator = new CpuAllocator();
  return *allocator;
}

}  // namespace

Allocator& cpu_allocator() { return cpu_allocator_instance(); }

CpuMemoryStats cpu_memory_stats() { return cpu_allocator_instance().stats(); }

void reset_cpu_peak_memory_stats() { cpu_allocator_instance().reset_peak(); }

size_t cpu_cached_bytes() { return cpu_allocator_instance().cached_bytes(); }

void cpu_empty_cache() { cpu_allocator_instance().empty_cache(); }

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  LOCKSTEP_CHECK_KIND(built_with_cuda(), ErrorKind::NoCudaDevice, "cannot use ", device,
                      ": Lockstep was built without CUDA; install the CUDA toolkit and rebuild, or use Device::cpu()");
  LOCKSTEP_CHECK_KIND(device.index() < cuda_device_count(), ErrorKind::NoCudaDevice, "cannot use ", device,
                      ": this machine has ", cuda_device_count(), " CUDA device(s); use Device::cpu(), or a device "
                      "index below cuda_device_count()");
  return cuda::caching_allocator(device.index());
}

}  // namespace lockstep
