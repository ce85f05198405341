/// \file
/// The autograd graph. Every recorded op leaves one Node behind, linked to the Nodes that
/// produced its inputs; backward() walks these links from the loss to the leaves.
///
///     x (leaf) ──► AccumulateGrad            y = x * w + b
///     w (leaf) ──► AccumulateGrad ◄─┐
///                                  MulBackward ◄── AddBackward ◄── y.grad_fn()
///     b (leaf) ──► AccumulateGrad ◄───────────────┘
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

/// One step of the backward pass: given the gradient of the loss with respect to this node's
/// output, return the gradients with respect to each of its inputs.
///
/// \see @ref chapter1 "Chapter 1: Tensors, autograd and devices", which introduces it.
class Node {
 public:
  virtual ~Node() = default;
  /// Computes input gradients from `grad_output`; entry i pairs with next_edges()[i] and may be
  /// undefined when that input needs no gradient.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  /// The name PyTorch would print as grad_fn, e.g. "MulBackward".
  virtual std::string name() const = 0;
  /// Frees saved tensors after a backward pass without retain_graph; a later apply() must
  /// then fail with a clear message.
  virtual void release_saved() {}

  /// The nodes that produced each input (null for inputs that need no gradient).
  const std::vector<std::shared_ptr<Node>>& next_edges() const { return next_edges_; }
  /// Sets the input edges (done once, when the op records itself).
  void set_next_edges(std::vector<std::shared_ptr<Node>> edges) { next_edges_ = std::move(edges); }
  /// Creation order; backward runs ready nodes with the highest number first, as PyTorch does:
  /// later-created first, and AccumulateGrad before all (it has the largest number there is).
  uint64_t sequence_nr() const { return sequence_nr_; }

 protected:
  /// Takes the next sequence number.
  Node();
  /// Takes `sequence_nr` instead (AccumulateGrad: the largest).
  explicit Node(uint64_t sequence_nr) : sequence_nr_(sequence_nr) {}

 private:
  std::vector<std::shared_ptr<Node>> next_edges_;
  uint64_t sequence_nr_;
};

/// The sink for a leaf tensor: adds the incoming gradient into leaf.grad(), then runs the
/// leaf's post-accumulate-grad hooks (where DDP starts its all-reduce).
///
/// It runs as soon as the leaf's gradient is complete, whatever else is ready: its sequence
/// number is the largest there is. Creation order would not do: one leaf's node is shared by
/// every graph alive at once, and a training loop's `loss` keeps the last step's graph alive
/// while the next forward runs, so the node is older than every node of the new graph and
/// would wait for all of them, leaving DDP nothing to overlap.
class AccumulateGrad final : public Node {
 public:
  /// A sink for `leaf`.
  explicit AccumulateGrad(Tensor leaf) : Node(UINT64_MAX), leaf_(std::move(leaf)) {}
  /// Accumulates into the leaf; returns no input gradients.
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  /// "AccumulateGrad".
  std::string name() const override { return "AccumulateGrad"; }

 private:
  Tensor leaf_;
};

/// The gradient function of an op written as a lambda that captures what it saved:
/// `[x = SavedTensor(x)](const Tensor& grad) -> std::vector<Tensor> { ... x.unpack() ... }`.
/// Tensors the user can reach (inputs, outputs) are saved as SavedTensor, so that an in-place
/// change after the forward pass is caught; values only the op itself holds (a dropout mask,
/// pooling indices) are captured as they are.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

/// A Node whose backward is a lambda; almost every op uses this.
class FunctionNode final : public Node {
 public:
  /// A node named `name` computing input gradients with `backward`.
  FunctionNode(std::string name, BackwardFn backward) : name_(std::move(name)), backward_(std::move(backward)) {}
  /// Runs the lambda (an error once release_saved() has dropped it, or when a tensor it saved
  /// was changed in place since: the message then starts with this node's name).
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  /// The op's backward name.
  std::string name() const override { return name_; }
  /// Drops the lambda and the tensors it captured.
  void release_saved() override { backward_ = nullptr; }

 private:
  std::string name_;
  BackwardFn backward_;
};

/// The edge a gradient for `input` should flow along: its grad_fn if it has one, the leaf's
/// AccumulateGrad if it is a leaf that requires grad (created once and shared), else null.
std::shared_ptr<Node> gradient_edge(const Tensor& input);

/// Whether an op on these inputs must be recorded: grad mode is on and some input requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);

/// Records an op: if any input requires grad (and grad mode is on), `output` gets a
/// FunctionNode named `name` with `backward`, linked to the inputs' edges. Returns `output`.
/// `backward` must return one gradient per input, in the same order (undefined allowed).
Tensor record(Tensor output, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward);

}  // namespace lockstep
