#include "core/allocator.h"

#include <cstdlib>
#include <new>

#include "core/cuda_memory.h"
#include "core/error.h"

namespace lockstep {

namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    // aligned_alloc wants a size that is a multiple of the alignment (and > 0 to be unique).
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* ptr = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
    if (ptr == nullptr) {
      throw Error(detail::concat("cpu allocator: out of memory allocating ", nbytes, " bytes"));
    }
    return ptr;
  }
  void deallocate(void* ptr, size_t /*nbytes*/) override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  LOCKSTEP_CHECK(built_with_cuda(), "cannot use ", device,
                 ": Lockstep was built without CUDA (install the CUDA toolkit and rebuild, or use --device cpu)");
  LOCKSTEP_CHECK(device.index() < cuda_device_count(), "cannot use ", device, ": this machine has ",
                 cuda_device_count(), " CUDA device(s) (use --device cpu)");
  return cuda::caching_allocator(device.index());
}

}  // namespace lockstep
