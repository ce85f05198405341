/// \file
/// The loop every elementwise CPU kernel shares: walk N strided operands over one shape, a row
/// (the innermost dimension) at a time, spreading rows over OpenMP threads when it pays off.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace lockstep {

/// Below this many elements a loop runs on one thread: starting threads would cost more.
constexpr int64_t kParallelGrain = 32768;

/// Calls `row(base, n, step)` once per innermost row of `shape`, where `base[k]` is operand k's
/// element offset at the row's start and `step[k]` its stride along the row. Operand k walks
/// with `strides[k]` (0 for a broadcast dimension). Rows may run concurrently.
template <size_t N, class RowFn>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides,
                  const std::array<int64_t, N>& offsets, RowFn&& row) {
  const int64_t dims = static_cast<int64_t>(shape.size());
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  // A scalar is one row of one element.
  const int64_t inner = dims == 0 ? 1 : shape[dims - 1];
  const int64_t rows = numel / inner;
  std::array<int64_t, N> step{};
  for (size_t k = 0; k < N; ++k) step[k] = dims == 0 ? 0 : strides[k][dims - 1];

  // Row r's start: decompose r into indices of the outer dimensions, last fastest.
  auto row_base = [&](int64_t r) {
    std::array<int64_t, N> base = offsets;
    for (int64_t d = dims - 2; d >= 0 && r > 0; --d) {
      const int64_t index = r % shape[d];
      r /= shape[d];
      for (size_t k = 0; k < N; ++k) base[k] += index * strides[k][d];
    }
    return base;
  };

#pragma omp parallel for schedule(static) if (numel >= kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) row(row_base(r), inner, step);
}

}  // namespace lockstep
