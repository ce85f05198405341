/// \file
/// The checks every op runs before touching data, so that misuse ends in a sentence such as
/// "add: expected all tensors on the same device, got cpu and cuda:0" rather than a crash.
#pragma once

#include <initializer_list>

#include "tensor/tensor.h"

namespace lockstep {

/// Throws unless every tensor is defined; `op` names the caller in the message.
void check_defined(const char* op, std::initializer_list<const Tensor*> tensors);
/// Throws unless all tensors are on one device.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
/// Throws unless all tensors have one dtype.
void check_same_dtype(const char* op, std::initializer_list<const Tensor*> tensors);
/// Throws unless `t` has exactly `dims` dimensions; `what` names the argument ("input").
void check_dim(const char* op, const Tensor& t, int64_t dims, const char* what);
/// The shape both shapes broadcast to (NumPy rules), or a clear error.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

}  // namespace lockstep
