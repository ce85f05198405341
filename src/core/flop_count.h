/// \file
/// The process's count of floating-point operations in matrix products and convolutions, the
/// work that a model's speed is measured against (MFU: achieved FLOP/s over the hardware's
/// peak). The ops count where they hand work to a kernel (matmul and linear through the batched
/// GEMM, conv2d forward and backward), on every device, as PyTorch's
/// `torch.utils.flop_counter.FlopCounterMode` counts them: 2 flops per multiply-add, and
/// nothing for elementwise ops, reductions, normalisation or pooling, whose cost is memory
/// traffic rather than arithmetic. A backward pass counts the products it runs: the input's
/// and the weight's gradient each cost what the forward product did.
#pragma once

#include <cstdint>

namespace lockstep {

/// Adds `flops` to the count (from any thread).
void count_flops(int64_t flops);

/// The flops counted since the process started. A training step's cost is the difference
/// between two readings, taken where no other work (evaluation) runs between them.
int64_t flops_counted();

}  // namespace lockstep
