/// \file
/// LOCKSTEP_HOST_DEVICE marks a small inline function that both the CPU kernels (compiled by
/// the C++ compiler) and the CUDA kernels (compiled by nvcc) call, so that a rule such as an
/// optimiser's update is written once and the two backends cannot drift apart.
#pragma once

#if defined(__CUDACC__)
/// Compiles the function for the CPU and for the GPU (nvcc).
#define LOCKSTEP_HOST_DEVICE __host__ __device__ __forceinline__
#else
/// Compiles the function for the CPU (a plain C++ compiler).
#define LOCKSTEP_HOST_DEVICE inline
#endif
