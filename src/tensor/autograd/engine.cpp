#include "tensor/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensor/autocast.h"
#include "tensor/autograd/grad_mode.h"
#include "core/error.h"
#include "tensor/ops/elementwise.h"
#include "util/trace.h"

namespace lockstep {

namespace {
// The callbacks queued during this thread's running backward pass, and whether one runs.
// Per thread: DataParallel's replicas may run backward passes on threads of their own.
thread_local std::vector<std::function<void()>> queued_callbacks;
thread_local bool backward_running = false;

// Marks this thread as running a backward pass for the guard's lifetime; on the way out,
// normal or by an exception, whatever is still queued is dropped.
class BackwardScope {
 public:
  BackwardScope() {
    LOCKSTEP_CHECK(!backward_running, "backward: called from inside a backward pass on the same thread (a hook or "
                                      "callback may not start another backward)");
    backward_running = true;
  }
  ~BackwardScope() {
    backward_running = false;
    queued_callbacks.clear();
  }
  BackwardScope(const BackwardScope&) = delete;
  BackwardScope& operator=(const BackwardScope&) = delete;
};
}  // namespace

void queue_backward_callback(std::function<void()> callback) {
  LOCKSTEP_CHECK(backward_running, "queue_backward_callback: no backward pass is running on this thread; call it "
                                   "from a gradient hook");
  queued_callbacks.push_back(std::move(callback));
}

void run_backward(const std::shared_ptr<Node>& root, const Tensor& grad, bool retain_graph) {
  BackwardScope scope;
  const RecordFunction span("backward", "autograd");
  // Gradients are computed with recording off: we do not build graphs of graphs.
  NoGradGuard no_grad;
  // ...and with autocast off: each gradient keeps the dtype its forward value had.
  const autocast::Suspend no_autocast;

  // 1. Count, for every node, how many edges point at it: it may run only after all of them.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root.get()};
  std::unordered_set<Node*> seen{root.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next_edges()) {
      if (!next) continue;
      ++dependencies[next.get()];
      if (seen.insert(next.get()).second) stack.push_back(next.get());
    }
  }

  // 2. Run ready nodes, latest-created first (as PyTorch does), so the last layer's
  //    gradients are finished first: that is the order DDP's buckets expect. A leaf's
  //    AccumulateGrad has the largest number of all, so it runs the moment it is ready.
  auto later_first = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence_nr() < b->sequence_nr();
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later_first)> ready(later_first);
  std::unordered_map<Node*, Tensor> pending;  // gradient summed so far for each waiting node
  pending[root.get()] = grad;
  ready.push(root);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    const Tensor node_grad = std::move(pending[node.get()]);
    pending.erase(node.get());
    // A node that received no gradient on any path passes none on, but still counts as run
    // so that the nodes below it are not left waiting.
    std::vector<Tensor> input_grads;
    if (node_grad.defined()) {
      const RecordFunction span([&] { return node->name(); }, "autograd");
      input_grads = node->apply(node_grad);
    }
    if (!retain_graph) node->release_saved();

    // 3. Hand each input gradient to the node that produced that input, summing if several
    //    paths meet there; the node becomes ready when its last contribution arrives.
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const auto& next = edges[i];
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor& slot = pending[next.get()];
        slot = slot.defined() ? add(slot, input_grads[i]) : input_grads[i];
      }
      if (--dependencies[next.get()] == 0) ready.push(next);
    }
  }

  // 4. Every gradient is in place: run what hooks asked to run at the very end (a callback
  //    may queue another, which then runs too).
  for (size_t i = 0; i < queued_callbacks.size(); ++i) {
    const std::function<void()> callback = queued_callbacks[i];
    callback();
  }
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  LOCKSTEP_CHECK(requires_grad(), "backward: this tensor does not require grad and has no grad_fn; did you forget "
                                  "requires_grad_() on a leaf, or compute it under NoGradGuard?");
  Tensor seed = gradient;
  if (!seed.defined()) {
    LOCKSTEP_CHECK(numel() == 1, "backward: grad can be implicitly created only for scalar outputs; this tensor has "
                                 "shape ", shape_str(shape()), ", so pass a gradient of that shape");
    seed = ones_like(*this);
  }
  LOCKSTEP_CHECK(seed.shape() == shape(), "backward: gradient has shape ", shape_str(seed.shape()),
                 " but the tensor has shape ", shape_str(shape()));
  LOCKSTEP_CHECK(seed.device() == device(), "backward: gradient is on ", seed.device(), " but the tensor is on ", device());
  LOCKSTEP_CHECK(seed.dtype() == dtype(), "backward: gradient is ", dtype_name(seed.dtype()), " but the tensor is ",
                 dtype_name(dtype()));
  run_backward(gradient_edge(*this), seed, retain_graph);
}

}  // namespace lockstep
