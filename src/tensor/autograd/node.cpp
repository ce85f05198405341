#include "tensor/autograd/node.h"

#include <atomic>

#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/saved_tensor.h"
#include "tensor/tensor_impl.h"
#include "core/error.h"

namespace lockstep {

Node::Node() {
  static std::atomic<uint64_t> counter{0};
  sequence_nr_ = counter++;
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  const Tensor current = leaf_.grad();
  if (!current.defined()) {
    // First gradient: keep it if nobody else holds it, otherwise take a private copy, so a
    // later in-place accumulation cannot change someone else's tensor.
    // (Two handles to one tensor share one Storage reference, so both counts are needed.)
    const bool exclusive = detail::TensorInternals::handle_count(grad_output) == 1 && grad_output.storage().use_count() == 1 &&
                           grad_output.is_contiguous() && grad_output.numel() == leaf_.numel();
    leaf_.set_grad(exclusive ? grad_output.detach() : grad_output.detach().clone());
    // From here the memory is the leaf's gradient, whatever it was computed as.
    leaf_.grad().storage()->set_category(MemoryCategory::gradients);
  } else {
    current.add_(grad_output);
  }
  // The gradient of this leaf is now complete for this backward pass.
  // Iterate over a copy: a hook may register or remove hooks.
  const auto hooks = detail::TensorInternals::impl(leaf_).autograd.post_accumulate_grad_hooks;
  for (const auto& [handle, hook] : hooks) hook(leaf_);
  return {};
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  LOCKSTEP_CHECK(backward_ != nullptr, "backward: trying to backward through the graph a second time (", name_,
                 " already freed its saved tensors); pass retain_graph=true to the first backward if you need to "
                 "call it twice");
  try {
    return backward_(grad_output);
  } catch (const SavedTensorModified& modified) {
    // The lambda cannot know its node's name; this is where a student needs it.
    throw Error(name_ + ": " + modified.what());
  }
}

std::shared_ptr<Node> gradient_edge(const Tensor& input) {
  if (!input.defined()) return nullptr;
  if (input.grad_fn()) return input.grad_fn();
  if (!input.requires_grad()) return nullptr;
  // One AccumulateGrad per leaf, shared by every graph that uses the leaf at the same time.
  auto& meta = detail::TensorInternals::impl(input).autograd;
  std::shared_ptr<Node> accumulator = meta.grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(input);
    meta.grad_accumulator = accumulator;
  }
  return accumulator;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

Tensor record(Tensor output, const char* name, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!any_requires_grad(inputs)) return output;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  std::vector<std::shared_ptr<Node>> edges;
  edges.reserve(inputs.size());
  for (const Tensor& input : inputs) edges.push_back(gradient_edge(input));
  node->set_next_edges(std::move(edges));
  output.set_grad_fn(std::move(node));
  return output;
}

}  // namespace lockstep
