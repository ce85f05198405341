/// \file
/// What a Tensor handle points at: its layout, its storage and its autograd state. Only the
/// tensor unit's own files (tensor/, tensor/autograd/, tensor/ops/) include this header; code
/// above the unit uses Tensor's methods.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// Autograd state of one tensor.
struct AutogradMeta {
  bool requires_grad = false;     ///< Whether gradients are wanted for (or through) it.
  Tensor grad;                    ///< Accumulated gradient (leaves only).
  std::shared_ptr<Node> grad_fn;  ///< Producing node (non-leaves only).
  std::weak_ptr<Node> grad_accumulator;  ///< The leaf's AccumulateGrad node, while a graph holds it.
  std::vector<std::pair<HookHandle, PostAccumulateGradHook>> post_accumulate_grad_hooks;  ///< Hooks on a leaf.
};

/// The shared state behind Tensor handles.
struct TensorImpl {
  std::shared_ptr<Storage> storage;  ///< The memory (shared with views).
  Shape shape;                       ///< Sizes.
  Shape strides;                     ///< Strides, in elements.
  int64_t offset = 0;                ///< First element, in elements from the storage start.
  DType dtype = DType::f32;          ///< Element type.
  AutogradMeta autograd;             ///< Gradient bookkeeping.
};

namespace detail {
/// The tensor unit's door to a Tensor's implementation: wrapping a new TensorImpl in a handle
/// (factories, views), reaching it, and counting the handles that share it.
struct TensorInternals {
  /// A handle to `impl`.
  static Tensor wrap(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
  /// The implementation behind `tensor` (which must be defined).
  static TensorImpl& impl(const Tensor& tensor) { return *tensor.impl_; }
  /// How many handles refer to `tensor`'s implementation: autograd reuses a gradient buffer
  /// only when nothing else can see it.
  static long handle_count(const Tensor& tensor) { return tensor.impl_.use_count(); }
};
}  // namespace detail

}  // namespace lockstep
