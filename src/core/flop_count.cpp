// The count is one atomic integer: DataParallel's replicas and a convolution's threads add to it
// at once.
#include "core/flop_count.h"

#include <atomic>

namespace lockstep {
namespace {

std::atomic<int64_t> counted{0};

}  // namespace

void count_flops(int64_t flops) { counted.fetch_add(flops, std::memory_order_relaxed); }

int64_t flops_counted() { return counted.load(std::memory_order_relaxed); }

}  // namespace lockstep
