/// \file
/// Element types of tensors, and the compile-time map from a DType to its C++ type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "core/half.h"

namespace lockstep {

/// The element type of a tensor (torch.dtype). f32 is the default for floating point.
enum class DType { f32, f64, f16, bf16, i64, i32, u8, boolean };

/// Bytes per element.
size_t element_size(DType dtype);
/// Short name: "f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool".
std::string dtype_name(DType dtype);
/// PyTorch's name for the same type, used when printing ("torch.float64" prints as "float64").
std::string dtype_torch_name(DType dtype);
/// Whether the type is a floating-point type (f32, f64, f16, bf16).
bool is_floating(DType dtype);
/// Prints dtype_name().
std::ostream& operator<<(std::ostream& out, DType dtype);

/// Maps a C++ element type to its DType: `dtype_of<float>::value == DType::f32`.
template <class T> struct dtype_of;
/// \cond INTERNAL
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
/// \endcond

/// A value that carries a C++ type T, so that a generic lambda `[&](auto tag) {...}` can name T
/// as `typename decltype(tag)::%type` (see dispatch.h).
template <class T> struct TypeTag {
  using type = T;  ///< The carried type.
};

}  // namespace lockstep
