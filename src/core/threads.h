/// \file
/// How many CPU threads kernels use (OpenMP), set once by a program before its first op.
#pragma once

namespace lockstep {

/// Sets the number of threads CPU kernels use (like torch.set_num_threads); must be >= 1.
void set_num_threads(int threads);
/// The number of threads CPU kernels use.
int get_num_threads();

}  // namespace lockstep
