// The caching allocator behind every CUDA tensor (see core/cuda/memory.h for why it exists),
// and the caching allocator of pinned host memory.
//
// Requests are rounded up to a size class (lockstep::size_class, as on the CPU: multiples of
// 512 bytes up to 1 MiB, multiples of 2 MiB above). A freed block goes onto its class's free
// list; an allocation first looks there. Only when the list is empty does it call cudaMalloc,
// and if the GPU is full it returns every cached block to the driver and tries once more
// before reporting out-of-memory.
//
// Free lists are kept per stream: a block is only reused by work on the stream it was
// allocated for, whose order makes the reuse safe. (A tensor used on a second stream must be
// kept alive until that stream is done with it; PyTorch's record_stream solves the same
// problem.) The opposite case, a block allocated on a side stream and last read on the main
// stream (chapter 3: a replica's activations, read by backward), is safe only because every
// batch of work on a side stream starts by waiting for the main stream (parallel_apply), so
// the block's next user there is queued after its last reader; a new user of side streams
// must keep that rule.
//
// A CUDA graph (core/cuda/graph.h) replays the kernels it recorded on the addresses they used
// then, for as long as the graph lives. So while a graph captures work on a stream, the blocks
// that work allocates come from the graph's own pool, whose freed blocks only a later capture
// into the same pool reuses; and any other block freed during a capture (the shared cache's,
// or another graph's output), which the recorded kernels may still read or write, is held by
// the pool too. Releasing the pool (the graph's reset) hands its blocks to the shared cache and
// the held ones back where they came from.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/cuda/check.cuh"
#include "core/cuda/block_use.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/graph_pool.cuh"
#include "core/cuda/memory.h"

namespace lockstep::cuda {

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// LOCKSTEP_NO_CUDA_MEMORY_CACHING=1 (PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING) turns the cache
// off: every block has exactly the size asked for and goes back to cudaFree when its tensor
// dies. Far slower, but compute-sanitizer then sees each tensor's own bounds, and a use after
// free, which a reused or rounded-up block would hide from it. The GPU check runs memcheck so.
bool caching_enabled() {
  const char* value = std::getenv("LOCKSTEP_NO_CUDA_MEMORY_CACHING");
  return value == nullptr || std::string(value) != "1";
}

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int index) : device_(Device::cuda(index)), caching_(caching_enabled()) {}

  void* allocate(size_t nbytes) override {
    const size_t size = block_size(nbytes);
    const cudaStream_t stream = stream_for(device_);
    std::lock_guard<std::mutex> lock(mutex_);
    // Work being captured into a graph takes its blocks from the graph's pool.
    const GraphPoolId pool = (capture_pool_ != 0 && stream == capture_stream_) ? capture_pool_ : 0;
    // A cached block of this class: reuse it (the common case after the first training step).
    void* ptr = nullptr;
    if (pool != 0) {
      ptr = take_from(pools_.at(pool).free_blocks[size]);
    } else if (caching_) {
      ptr = take_from(free_blocks_[{stream, size}]);
    }
    if (ptr == nullptr) ptr = allocate_from_driver(size);
    live_blocks_[ptr] = {stream, pool};
    if (pool != 0) ++pools_.at(pool).live_blocks;
    stats_.allocated_bytes += static_cast<int64_t>(size);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    const size_t size = block_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto owner = live_blocks_.find(ptr);
    LOCKSTEP_CHECK(owner != live_blocks_.end(), "CUDA caching allocator: ", device_,
                   " was asked to free a pointer it did not hand out, or one already freed");
    const LiveBlock block = owner->second;
    if (block.pool != 0) --pools_.at(block.pool).live_blocks;
    if (capture_pool_ != 0 && block.pool != capture_pool_) {
      // Freed while a graph captures, and not one of the capture's own blocks: the recorded
      // kernels may still use it at every replay, so the capturing graph holds it.
      pools_.at(capture_pool_).held_blocks.push_back({{block.stream, size}, ptr, block.pool});
    } else if (block.pool != 0) {
      // A graph's block: its graph may replay onto it, so only the graph's captures reuse it,
      // until the graph is reset.
      GraphPool& pool = pools_.at(block.pool);
      if (!pool.released) {
        pool.free_blocks[size].push_back(ptr);
      } else {
        free_blocks_[{block.stream, size}].push_back(ptr);
      }
    } else if (caching_) {
      // Keep the block: work already queued on the stream may still read it, and any later
      // user of the block is queued after that work on the same stream.
      free_blocks_[{block.stream, size}].push_back(ptr);
    } else {
      // Called from a tensor's destructor, which must not throw.
      detail::release_quietly("freeing a CUDA block", [&] {
        DeviceGuard guard(device_);
        finish_queued_work();
        free_to_driver(ptr, size);
      });
    }
    live_blocks_.erase(owner);
    stats_.allocated_bytes -= static_cast<int64_t>(size);
    // A reset graph's pool is gone once the last of its blocks has come back.
    if (block.pool != 0 && pools_.at(block.pool).released && pools_.at(block.pool).live_blocks == 0) {
      pools_.erase(block.pool);
    }
  }

  Device device() const override { return device_; }

  // The stream `ptr` was handed out on (its free list's), or null if it is not a live block.
  cudaStream_t stream_of(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto owner = live_blocks_.find(ptr);
    return owner != live_blocks_.end() ? owner->second.stream : nullptr;
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    LOCKSTEP_CHECK(capture_pool_ == 0, "empty_cache: ", device_, " has a CUDA graph capturing work; empty the cache "
                   "before the capture or after it");
    release_cached();
  }

  void begin_capture(cudaStream_t stream, GraphPoolId pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    LOCKSTEP_CHECK(caching_, "a CUDA graph needs the caching allocator (its blocks must outlive the capture); unset "
                   "LOCKSTEP_NO_CUDA_MEMORY_CACHING");
    LOCKSTEP_CHECK(capture_pool_ == 0, "a CUDA graph is already capturing work on ", device_,
                   "; end that capture before starting another");
    GraphPool& entry = pools_[pool];
    entry.stream = stream;
    capture_stream_ = stream;
    capture_pool_ = pool;
  }

  void end_capture() {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_stream_ = nullptr;
    capture_pool_ = 0;
  }

  void release_pool(GraphPoolId pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = pools_.find(pool);
    if (found == pools_.end()) return;
    GraphPool& entry = found->second;
    for (auto& [size, blocks] : entry.free_blocks) {
      auto& shared = free_blocks_[{entry.stream, size}];
      shared.insert(shared.end(), blocks.begin(), blocks.end());
    }
    for (const HeldBlock& held : entry.held_blocks) {
      // Back to the graph it came from, if that graph still replays; else to the shared cache.
      const auto from = pools_.find(held.pool);
      if (held.pool != 0 && from != pools_.end() && !from->second.released) {
        from->second.free_blocks[held.key.second].push_back(held.ptr);
      } else {
        free_blocks_[held.key].push_back(held.ptr);
      }
    }
    // Blocks still held by tensors (a graph's outputs) join the shared cache when freed.
    if (entry.live_blocks == 0) {
      pools_.erase(found);
    } else {
      entry.free_blocks.clear();
      entry.held_blocks.clear();
      entry.released = true;
    }
  }

 private:
  // Called with the mutex held.
  void* allocate_from_driver(size_t size) {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t status = device_malloc(&ptr, size);
    // (cudaFree cannot run while a graph captures, so then there is no second try.)
    if (status == cudaErrorMemoryAllocation && capture_pool_ == 0) {
      // Cached blocks of other sizes may be what fills the GPU: give them back and retry.
      cudaGetLastError();
      release_cached();
      status = device_malloc(&ptr, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw Error(ErrorKind::OutOfMemory,
                  lockstep::detail::concat(device_, " is out of memory: tried to allocate ", mib(size), " MiB with ",
                                           mib(stats_.allocated_bytes), " MiB already in use by tensors; free "
                                           "tensors, or use smaller batches or a smaller model"));
    }
    LOCKSTEP_CUDA_CHECK(status);
    ++stats_.cuda_mallocs;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    return ptr;
  }

  // cudaMalloc, also while a graph captures: a capturing thread may not call it in CUDA's
  // thread-local capture mode, though it touches no stream and a replay never repeats it, so for
  // its duration this thread's mode is relaxed (as PyTorch's allocator does). Called with the
  // mutex held.
  cudaError_t device_malloc(void** ptr, size_t size) const {
    if (capture_pool_ == 0) return cudaMalloc(ptr, size);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    LOCKSTEP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t status = cudaMalloc(ptr, size);
    LOCKSTEP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    return status;
  }

  // The bytes a request really takes: its size class, or, without caching, exactly the request.
  size_t block_size(size_t nbytes) const { return caching_ ? size_class(nbytes) : std::max<size_t>(nbytes, 1); }

  // Called with the mutex held: a block of `free_list`, or null.
  void* take_from(std::vector<void*>& free_list) {
    if (free_list.empty()) return nullptr;
    void* ptr = free_list.back();
    free_list.pop_back();
    ++stats_.cache_hits;
    return ptr;
  }

  // Work still queued may use a block about to be freed: let the device finish it first
  // (cudaFree would wait for it anyway). Called with this device current.
  static void finish_queued_work() { LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize()); }

  // Called with the mutex held, this device current and its queued work finished.
  void free_to_driver(void* ptr, size_t size) {
    LOCKSTEP_CUDA_CHECK(cudaFree(ptr));
    stats_.reserved_bytes -= static_cast<int64_t>(size);
  }

  // Called with the mutex held: one wait for the device, then every cached block goes back.
  void release_cached() {
    DeviceGuard guard(device_);
    finish_queued_work();
    for (auto& [key, blocks] : free_blocks_) {
      // Off the list before it is freed: if a cudaFree fails (and throws), no freed block is
      // left behind to be handed out or freed again.
      while (!blocks.empty()) {
        void* ptr = blocks.back();
        blocks.pop_back();
        free_to_driver(ptr, key.second);
      }
    }
  }

  const Device device_;
  const bool caching_;  // false under LOCKSTEP_NO_CUDA_MEMORY_CACHING=1
  std::mutex mutex_;
  using CacheKey = std::pair<cudaStream_t, size_t>;  // (stream, size class)
  struct LiveBlock {
    cudaStream_t stream;  // whose free list it joins
    GraphPoolId pool;     // the graph pool it came from; 0: the shared cache
  };
  // A block freed during a capture that was not the capture's own, held for its replays.
  struct HeldBlock {
    CacheKey key;
    void* ptr;
    GraphPoolId pool;  // the graph pool it came from; 0: the shared cache
  };
  // The blocks of one CUDA graph (see the top of this file).
  struct GraphPool {
    cudaStream_t stream = nullptr;                            // the stream its graph captured
    std::map<size_t, std::vector<void*>> free_blocks;         // size class -> freed, for its captures only
    std::vector<HeldBlock> held_blocks;                       // others' blocks freed during its capture
    int64_t live_blocks = 0;                                  // its blocks held by tensors now
    bool released = false;                                    // its graph is gone; live blocks go back when freed
  };

  std::map<CacheKey, std::vector<void*>> free_blocks_;  // the shared cache
  std::unordered_map<void*, LiveBlock> live_blocks_;    // block handed out -> where it goes back
  std::unordered_map<GraphPoolId, GraphPool> pools_;
  cudaStream_t capture_stream_ = nullptr;  // the stream a graph is capturing, if any
  GraphPoolId capture_pool_ = 0;           // that graph's pool; 0 when none captures
  MemoryStats stats_;
};

// Pinned host memory, cached too: cudaHostAlloc is slow and cudaFreeHost waits for the whole
// GPU, which would stall the CPU once per training step when each batch is pinned. A pinned
// block may still be read by a non-blocking copy queued on a stream when its tensor is freed,
// so every such copy records an event on the block (record_pinned_use), and a cached block is
// handed out again only once all its events have completed.
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t size = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& free_list = free_blocks_[size];
    for (auto it = free_list.begin(); it != free_list.end(); ++it) {
      if (copies_finished(*it)) {
        void* ptr = *it;
        free_list.erase(it);
        return ptr;
      }
    }
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocDefault);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      LOCKSTEP_FAIL("pin_memory: could not pin ", mib(size), " MiB of host memory");
    }
    LOCKSTEP_CUDA_CHECK(status);
    blocks_.insert(ptr);
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    free_blocks_[size_class(nbytes)].push_back(ptr);
  }

  Device device() const override { return Device::cpu(); }
  bool pinned() const override { return true; }

  void record_use(void* block, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (blocks_.count(block) == 0) return;  // not a block of this allocator
    // A copy recorded in a CUDA graph would read the block again at every replay, long after
    // it was handed out anew, and its event would belong to the graph, not to this stream.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    LOCKSTEP_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    LOCKSTEP_CHECK(capturing == cudaStreamCaptureStatusNone, "a copy to or from pinned memory cannot be recorded in a "
                   "CUDA graph: copy the batch to the GPU before the capture, into the graph's static inputs");
    // A pinned tensor that lives long and is copied every step would pile up events otherwise.
    copies_finished(block);
    cudaEvent_t event;
    LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    LOCKSTEP_CUDA_CHECK(cudaEventRecord(event, stream));
    pending_[block].push_back(event);
  }

 private:
  // Called with the mutex held: forgets the events of the copies on `block` that are done
  // (copies on several streams may finish in any order), and says whether none is left.
  bool copies_finished(void* block) {
    auto found = pending_.find(block);
    if (found == pending_.end()) return true;
    auto& events = found->second;
    // Completed events leave the list before any is destroyed, so an error partway (which
    // throws) cannot leave a destroyed event behind to be queried again.
    const auto finished = std::partition(events.begin(), events.end(), [](cudaEvent_t e) { return !event_completed(e); });
    std::vector<cudaEvent_t> completed(finished, events.end());
    events.erase(finished, events.end());
    for (cudaEvent_t event : completed) LOCKSTEP_CUDA_CHECK(cudaEventDestroy(event));
    if (!events.empty()) return false;
    pending_.erase(found);
    return true;
  }

  std::mutex mutex_;
  std::unordered_set<void*> blocks_;                                 // every block ever allocated
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;       // size class -> cached blocks
  std::unordered_map<void*, std::vector<cudaEvent_t>> pending_;      // block -> copies in flight
};

PinnedAllocator& pinned_allocator_instance() {
  static auto* allocator = new PinnedAllocator();
  return *allocator;
}

constexpr int kMaxDevices = 64;

CachingAllocator& allocator_of(Device device) {
  LOCKSTEP_CHECK(device.is_cuda(), "memory statistics: expected a CUDA device, got ", device);
  return static_cast<CachingAllocator&>(caching_allocator(device.index()));
}

}  // namespace

Allocator& caching_allocator(int index) {
  LOCKSTEP_CHECK(index >= 0 && index < kMaxDevices, "caching_allocator: no CUDA device ", index);
  // Never destroyed: tensors that live until exit may still free their blocks after static
  // destructors would have run, and the driver reclaims all device memory at exit anyway.
  static auto* allocators = new std::array<std::unique_ptr<CachingAllocator>, kMaxDevices>();
  static std::mutex creating;
  std::lock_guard<std::mutex> lock(creating);
  auto& slot = (*allocators)[index];
  if (!slot) slot = std::make_unique<CachingAllocator>(index);
  return *slot;
}

Allocator& pinned_allocator() {
  LOCKSTEP_CHECK(cuda_device_count() > 0, "pin_memory: pinned memory needs a CUDA device, and this machine has none");
  return pinned_allocator_instance();
}

void record_pinned_use(void* block, cudaStream_t stream) { pinned_allocator_instance().record_use(block, stream); }

cudaStream_t allocation_stream(Device device, void* block) { return allocator_of(device).stream_of(block); }

MemoryStats memory_stats(Device device) { return allocator_of(device).stats(); }
void reset_peak_memory_stats(Device device) { allocator_of(device).reset_peak(); }
void empty_cache(Device device) { allocator_of(device).empty_cache(); }

void begin_graph_capture(Device device, cudaStream_t stream, GraphPoolId pool) {
  allocator_of(device).begin_capture(stream, pool);
}
void end_graph_capture(Device device) { allocator_of(device).end_capture(); }
void release_graph_pool(Device device, GraphPoolId pool) { allocator_of(device).release_pool(pool); }

}  // namespace lockstep::cuda
