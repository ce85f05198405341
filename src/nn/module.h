/// \file
/// Module, the base of every layer and model (torch.nn.Module): it owns named parameters,
/// buffers and child modules, and gives them to optimisers, to `to(device)`, to state_dict and
/// to distributed wrappers by walking the tree in registration order.
///
/// A layer registers what it owns in its constructor and keeps a handle to each as a public
/// member, as in PyTorch:
///
///     class Linear : public Module {
///      public:
///       Linear(int64_t in, int64_t out) {
///         weight = register_parameter("weight", empty({out, in}));  // shared handle
///       }
///       Tensor forward(const Tensor& x) override { return linear(x, weight); }
///       Tensor weight;
///     };
///
/// The member and the registered entry are the same tensor (a Tensor is a handle), so anything
/// that changes one in place (an optimiser step, `to`, `load_state_dict`) changes the other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "tensor/tensor.h"
#include "nn/state_dict.h"

namespace lockstep {

/// What `load_state_dict(state, strict = false)` could not match, by name (torch's
/// `_IncompatibleKeys`): with strict = true any of these is an error instead.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;     ///< The module's keys that the state dict lacks.
  std::vector<std::string> unexpected_keys;  ///< The state dict's keys that the module lacks.
};

class Module;

/// A hook run before a module's forward (torch's register_forward_pre_hook): it sees the module
/// and its input. FSDP all-gathers a unit's parameters here.
using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
/// A hook run after a module's forward (torch's register_forward_hook): it sees the module, the
/// input and the output, and returns the output the caller receives (the same, or another, as a
/// PyTorch hook that returns a value replaces it). FSDP frees a unit's parameters here and
/// threads the output through a node whose backward gathers them again.
using ForwardHook = std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;

/// The base class of layers and models, like torch.nn.Module. Subclasses register their
/// parameters, buffers and children in the constructor and implement forward().
///
/// Modules are held by std::shared_ptr (children are shared, as in PyTorch a submodule is an
/// object referenced by its parent) and cannot be copied: a copy would silently share every
/// parameter with the original.
///
/// \see @ref chapter2 "Chapter 2: Training on one device", which introduces it.
class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;             ///< Not copyable (see the class comment).
  Module& operator=(const Module&) = delete;  ///< Not copyable (see the class comment).

  /// The computation of the module. Called through operator().
  virtual Tensor forward(const Tensor& input) = 0;
  /// Runs forward(input): `model(x)` as in PyTorch. While tracing (util/trace.h) the call is a
  /// span named after the module, "Conv2d.forward", so nested modules show as nested spans.
  Tensor operator()(const Tensor& input);

  // Hooks around forward (only operator() runs them, as only PyTorch's __call__ does)
  /// Runs `hook` before each forward, after the hooks registered before it; returns a handle
  /// for remove_forward_hook.
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  /// Runs `hook` after each forward, after the hooks registered before it, each receiving the
  /// output the previous one returned; returns a handle for remove_forward_hook.
  HookHandle register_forward_hook(ForwardHook hook);
  /// Removes a hook registered by either function (an unknown handle is an error).
  void remove_forward_hook(HookHandle handle);

  // Registration (called by subclasses' constructors)
  /// Adds a learnable tensor under `name` and marks it requires_grad; returns it so that a
  /// member can hold the same handle. It must be a floating-point leaf.
  Tensor register_parameter(const std::string& name, Tensor tensor);
  /// Adds a tensor that is state but not learned (running statistics, counters): it moves with
  /// `to` and is saved in state_dict, but optimisers never see it. Returns it.
  Tensor register_buffer(const std::string& name, Tensor tensor);
  /// Adds a child module under `name` (its parameters appear as "name.weight", ...); returns it
  /// with its own type so that a member can hold it.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // The tree, in registration order (this module's own entries first, then each child's)
  /// Every parameter of this module and its descendants, each tensor once.
  std::vector<Tensor> parameters() const;
  /// parameters() with dotted names: "weight", "0.weight", "layer1.0.conv1.weight".
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  /// Every buffer of this module and its descendants, each tensor once.
  std::vector<Tensor> buffers() const;
  /// buffers() with dotted names: "bn1.running_mean", ...
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  /// Replaces the child registered as `name` by `module`, at the same place in the tree, so
  /// that state_dict keys and the order of parameters() stay as they were; returns the child it
  /// replaced (libtorch's replace_module). There must be a child of that name. It first calls
  /// on_module_replaced, so that a module holding its own typed handle to the child re-points
  /// it; if that throws (the new module has the wrong type), nothing is changed.
  /// convert_sync_batchnorm (distributed/sync_batch_norm.h) swaps BatchNorm2d layers this way.
  std::shared_ptr<Module> replace_module(const std::string& name, std::shared_ptr<Module> module);
  /// The direct children.
  std::vector<std::shared_ptr<Module>> children() const;
  /// The direct children with their names.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// Total number of elements over parameters() (the "model size" papers quote).
  int64_t num_parameters() const;

  // Modes and gradients
  /// Sets training mode (true) or evaluation mode (false) on this module and all descendants:
  /// it changes what Dropout and BatchNorm2d do. Modules start in training mode.
  void train(bool mode = true);
  /// train(false).
  void eval() { train(false); }
  /// Whether this module is in training mode.
  bool is_training() const { return training_; }
  /// Clears every parameter's gradient. With `set_to_none` (PyTorch 2's default) the gradient
  /// becomes undefined, so the next backward writes it fresh instead of adding to zeros;
  /// otherwise it is filled with zeros.
  void zero_grad(bool set_to_none = true);

  // Moving and converting, in place
  /// Moves every parameter and buffer (and any gradient) to `device` IN PLACE and returns
  /// *this. Unlike Tensor::to, the tensors keep their identity (Tensor::set_data), so handles
  /// held by members and by an optimiser built earlier stay valid, as in PyTorch.
  Module& to(Device device);
  /// Converts every floating-point parameter and buffer (and gradient) to `dtype` in place and
  /// returns *this. Integer buffers (num_batches_tracked) keep their dtype. `dtype` must be a
  /// floating-point type.
  Module& to(DType dtype);

  // Replicating
  /// A new module of the same class and settings, with its own parameters and buffers of the
  /// same shapes and its children built the same way; the values are not copied (the caller
  /// fills them, as DataParallel does every step). The library's layers and models implement
  /// it; a module of your own must override it to be replicated, or this throws an error that
  /// says so. Building a layer draws initial weights, unless a SkipInitGuard (nn/init.h) lives,
  /// as it does while DataParallel builds its replicas: a module of your own that draws its
  /// initial values other than through nn/init's functions would change the random numbers a
  /// training run draws after it is replicated. Why C++ needs this where PyTorch's replicate
  /// makes a shallow copy: chapter 3, section 3.
  virtual std::shared_ptr<Module> clone_structure() const;

  // Saving and loading
  /// Parameters and buffers by dotted name, in PyTorch's order: for each module its own
  /// parameters, then its own buffers, then each child's entries under "child_name.". As in
  /// PyTorch the tensors are detached but share the module's memory (they are not copies):
  /// writing into one writes the module, and a snapshot needs clone().
  StateDict state_dict() const;
  /// Copies values from `state` into this module's parameters and buffers in place (under
  /// NoGradGuard; dtypes are converted, devices too). A key must name a tensor of the same
  /// shape, and floating-point values only go into floating-point tensors. With `strict`,
  /// missing and unexpected keys are an error that lists them all, like PyTorch's
  /// `Missing key(s) in state_dict: "fc.bias". Unexpected key(s) in state_dict: "fc.b".`;
  /// without, they are returned. Everything is checked before anything is copied, so a failed
  /// load leaves the module unchanged (PyTorch may have copied part of it by then).
  IncompatibleKeys load_state_dict(const StateDict& state, bool strict = true);

  // Printing
  /// The module tree as PyTorch's repr prints it:
  ///
  ///     Sequential(
  ///       (0): Flatten(start_dim=1, end_dim=-1)
  ///       (1): Linear(in_features=784, out_features=256, bias=True)
  ///     )
  std::string str() const;
  /// The class name shown by str(): by default the C++ class name without namespaces, as
  /// PyTorch shows `self.__class__.__name__`.
  virtual std::string name() const;
  /// This module's settings, shown inside the parentheses by str() (PyTorch's extra_repr);
  /// empty by default.
  virtual std::string extra_repr() const { return ""; }

 protected:
  /// Called by replace_module(name, module) before child `name` becomes `module`. A module that
  /// keeps a typed member for a child it calls in forward (ResNet's `bn1`) must re-point that
  /// member here, or its forward would go on calling the old child; it should throw when
  /// `module` lacks the type the member needs. (PyTorch needs no such hook: a Python attribute
  /// *is* the registration.) The default does nothing, which suits modules whose forward goes
  /// through children(), as Sequential's does.
  virtual void on_module_replaced(const std::string& name, const std::shared_ptr<Module>& module);

  /// Formats a number as Python's repr does (0.1, 1e-05, 2.0), so that extra_repr() reads
  /// exactly like PyTorch's.
  static std::string format_float(double value);

 private:
  // Throws unless `name` can name a new entry of this module; `what` names the caller.
  void check_new_name(const std::string& name, const char* what) const;
  // The non-template part of register_module.
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // Appends this module's parameters (or buffers), then its children's, named under `prefix`.
  void collect(const std::string& prefix, bool want_parameters, std::vector<std::pair<std::string, Tensor>>& out) const;
  // Appends this module's parameters and buffers, then its children's, named under `prefix`.
  void collect_state(const std::string& prefix, StateDict& out) const;
  // Replaces every floating (or every) parameter's and buffer's data by convert(data), in place.
  void convert_in_place(bool floating_only, const std::function<Tensor(const Tensor&)>& convert);

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<HookHandle, ForwardPreHook>> forward_pre_hooks_;
  std::vector<std::pair<HookHandle, ForwardHook>> forward_hooks_;
  HookHandle next_hook_ = 1;
  bool training_ = true;
};

/// Prints module.str().
std::ostream& operator<<(std::ostream& out, const Module& module);

}  // namespace lockstep
