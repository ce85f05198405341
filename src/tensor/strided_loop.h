/// \file
/// The loop every elementwise CPU kernel shares: walk N strided operands over one shape, a row
/// (the innermost dimension) at a time, spreading rows over OpenMP threads when it pays off.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "tensor/tensor.h"

namespace lockstep {

/// Below this many elements a loop runs on one thread: starting threads would cost more.
constexpr int64_t kParallelGrain = 32768;

/// Longest piece of a row one call of the row function gets: long rows are cut into pieces
/// so that threads can share them (a dense tensor is a single row, see coalesce_dims).
constexpr int64_t kRowPiece = 16384;

/// Merges neighbouring dimensions that every operand walks as one, and drops dimensions of
/// size 1: dimensions d and d + 1 merge when `strides[k][d] == strides[k][d + 1] * shape[d + 1]`
/// for every operand k. The elements visited, and their order, stay the same; but a dense
/// tensor becomes a single dimension, so a loop over its innermost dimension runs over all of
/// it (one long loop the compiler vectorises, instead of, say, 53,248 rows of 26 elements).
template <size_t N>
void coalesce_dims(Shape& shape, std::array<Shape, N>& strides) {
  Shape merged_shape;
  std::array<Shape, N> merged_strides;
  // Walk from the innermost dimension out, extending the current merged one while we can.
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    bool extends = !merged_shape.empty();
    for (size_t k = 0; k < N && extends; ++k) {
      extends = strides[k][d] == merged_strides[k].back() * merged_shape.back();
    }
    if (extends) {
      merged_shape.back() *= shape[d];
    } else {
      merged_shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) merged_strides[k].push_back(strides[k][d]);
    }
  }
  // Back to outermost-first order.
  shape.assign(merged_shape.rbegin(), merged_shape.rend());
  for (size_t k = 0; k < N; ++k) strides[k].assign(merged_strides[k].rbegin(), merged_strides[k].rend());
}

/// The rows of a walk over `shape`, whose dimensions coalesce_dims has already merged, cut
/// into pieces of at most kRowPiece elements, in order: the units that the threads share.
/// Operand k walks with `strides[k]` (0 for a broadcast dimension) from `offsets[k]`.
template <size_t N>
class RowPieces {
 public:
  /// The pieces of `shape` walked with `strides` from `offsets` (all are referenced, not copied).
  RowPieces(const Shape& shape, const std::array<Shape, N>& strides, const std::array<int64_t, N>& offsets)
      : shape_(shape), strides_(strides), offsets_(offsets), numel_(shape_numel(shape)) {
    const int64_t dims = static_cast<int64_t>(shape.size());
    // A single element (every dimension of size 1) is one row of one element.
    inner_ = dims == 0 ? 1 : shape[dims - 1];
    rows_ = numel_ == 0 ? 0 : numel_ / inner_;
    pieces_per_row_ = (inner_ + kRowPiece - 1) / kRowPiece;
    for (size_t k = 0; k < N; ++k) step_[k] = dims == 0 ? 0 : strides[k][dims - 1];
  }

  /// Elements walked in all.
  int64_t numel() const { return numel_; }
  /// How many pieces there are.
  int64_t count() const { return rows_ * pieces_per_row_; }
  /// Each operand's stride along a row.
  const std::array<int64_t, N>& step() const { return step_; }
  /// Piece w's length; `base[k]` receives operand k's element offset at its start.
  int64_t piece(int64_t w, std::array<int64_t, N>& base) const {
    const int64_t start = (w % pieces_per_row_) * kRowPiece;
    base = offsets_;
    // The row's start: decompose its number into indices of the outer dimensions, last fastest.
    int64_t r = w / pieces_per_row_;
    for (int64_t d = static_cast<int64_t>(shape_.size()) - 2; d >= 0 && r > 0; --d) {
      const int64_t index = r % shape_[d];
      r /= shape_[d];
      for (size_t k = 0; k < N; ++k) base[k] += index * strides_[k][d];
    }
    for (size_t k = 0; k < N; ++k) base[k] += start * step_[k];
    return std::min(kRowPiece, inner_ - start);
  }

 private:
  const Shape& shape_;
  const std::array<Shape, N>& strides_;
  const std::array<int64_t, N>& offsets_;
  int64_t numel_, inner_ = 1, rows_ = 0, pieces_per_row_ = 1;
  std::array<int64_t, N> step_{};
};

/// Calls `row(base, n, step)` once per piece of each innermost row of `shape`, whose
/// dimensions coalesce_dims has already merged (see RowPieces), where `base[k]` is operand
/// k's element offset at the piece's start and `step[k]` its stride along the row. Pieces
/// may run concurrently. A caller that walks many slices of one layout (a sum, one slice per
/// output) merges once and calls this for each.
template <size_t N, class RowFn>
void for_each_coalesced_row(const Shape& shape, const std::array<Shape, N>& strides,
                            const std::array<int64_t, N>& offsets, RowFn&& row) {
  const RowPieces<N> pieces(shape, strides, offsets);
#pragma omp parallel for schedule(static) if (pieces.numel() >= kParallelGrain && pieces.count() > 1)
  for (int64_t w = 0; w < pieces.count(); ++w) {
    std::array<int64_t, N> base;
    const int64_t n = pieces.piece(w, base);
    row(base, n, pieces.step());
  }
}

/// for_each_coalesced_row over any layout: merges the dimensions first (coalesce_dims), so a
/// dense tensor is walked as one row.
template <size_t N, class RowFn>
void for_each_row(Shape shape, std::array<Shape, N> strides, const std::array<int64_t, N>& offsets,
                  RowFn&& row) {
  coalesce_dims(shape, strides);
  for_each_coalesced_row(shape, strides, offsets, std::forward<RowFn>(row));
}

}  // namespace lockstep
