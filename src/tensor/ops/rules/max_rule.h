/// \file
/// The comparisons max(), argmax() and max_pool2d() are built on, shared by the CPU and CUDA
/// kernels so that both pick the same winner: ties between numbers go to the earlier position,
/// and a NaN beats every number (as in PyTorch, a NaN anywhere makes the maximum NaN). Of
/// several NaNs, max() keeps the first and max_pool2d() the last, as PyTorch's kernels do.
#pragma once

#include "core/host_device.h"

namespace lockstep {

/// Whether `x` replaces `best`, the maximum so far: it is larger, or it is the first NaN (which
/// then stays, since nothing compares larger than a NaN). `x != x` holds exactly for a NaN and
/// never for an integer.
template <class T>
LOCKSTEP_HOST_DEVICE bool max_beats(T x, T best) {
  return x > best || (x != x && best == best);
}

/// max_pool2d's version of max_beats, PyTorch's pooling rule: `x` replaces `best` when it is
/// larger or when it is a NaN, so of several NaN in one window the last one's index is kept.
/// Written with `|` rather than `||` so that a compiler can turn a scan into selects.
template <class T>
LOCKSTEP_HOST_DEVICE bool pool_max_beats(T x, T best) {
  return (x > best) | (x != x);
}

}  // namespace lockstep
