// Keeping a GPU's stream busy, so that a test can see whether later work waits its turn.
#pragma once

#include "lockstep.h"

namespace lockstep::test {

/// Queues milliseconds of matrix products (16 of 2048 x 2048, 275 GFLOP in all: milliseconds
/// even for an H100) on the current stream of `gpu` and returns at once, long before they
/// finish. Work queued next on
/// that stream runs after them; work on another stream that fails to wait for this one runs
/// before them, and reads what is not yet written.
inline void queue_busy_work(Device gpu) {
  const Tensor a = full({2048, 2048}, 1.0 / 2048, TensorOptions().device(gpu));
  Tensor product = a;
  for (int i = 0; i < 16; ++i) product = matmul(product, a);
}

}  // namespace lockstep::test
