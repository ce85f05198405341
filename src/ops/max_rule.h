/// \file
/// The comparison max() and argmax() are built on, shared by the CPU and CUDA kernels so that
/// both pick the same winner: ties go to the earlier position, and a NaN beats every number
/// (as in PyTorch, a NaN anywhere makes the maximum NaN).
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

}  // namespace lockstep
