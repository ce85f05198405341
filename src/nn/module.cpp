#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <typeinfo>

#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/zero_grad.h"
#include "core/error.h"
#include "util/trace.h"

namespace lockstep {

namespace {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Keeps the first entry of every tensor: a tensor shared by two modules is one parameter.
NamedTensors without_repeats(const NamedTensors& named) {
  NamedTensors unique;
  for (const auto& entry : named) {
    const auto same = [&](const auto& kept) { return kept.second.is_same(entry.second); };
    if (std::none_of(unique.begin(), unique.end(), same)) unique.push_back(entry);
  }
  return unique;
}

std::vector<Tensor> tensors_of(const NamedTensors& named) {
  std::vector<Tensor> tensors;
  for (const auto& entry : named) tensors.push_back(entry.second);
  return tensors;
}

// Indents every line but the first by two spaces, as PyTorch's _addindent does for children.
std::string indent_child(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

// "Missing key(s) in state_dict: "a", "b"."
std::string key_list(const char* title, const std::vector<std::string>& keys) {
  std::string line = std::string(title) + " key(s) in state_dict: ";
  for (size_t i = 0; i < keys.size(); ++i) line += (i ? ", \"" : "\"") + keys[i] + "\"";
  return line + ".";
}

}  // namespace

// ---- registration --------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
  LOCKSTEP_CHECK(!name.empty() && name.find('.') == std::string::npos, what, ": a name must be non-empty and ",
                 "contain no '.', got \"", name, "\" on ", this->name(), " (dots separate the levels of a module tree)");
  auto taken = [&](const auto& entries) {
    for (const auto& entry : entries) {
      if (entry.first == name) return true;
    }
    return false;
  };
  LOCKSTEP_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), what, ": ", this->name(),
                 " already has a parameter, buffer or module named \"", name, "\"");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor) {
  check_new_name(name, "register_parameter");
  LOCKSTEP_CHECK(tensor.defined(), "register_parameter: parameter \"", name, "\" of ", this->name(), " is undefined");
  LOCKSTEP_CHECK(is_floating(tensor.dtype()), "register_parameter: parameter \"", name, "\" of ", this->name(),
                 " must be floating point to be learned, got ", dtype_name(tensor.dtype()),
                 " (use register_buffer for integer state)");
  tensor.requires_grad_(true);
  tensor.storage()->set_category(MemoryCategory::parameters);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name, "register_buffer");
  LOCKSTEP_CHECK(tensor.defined(), "register_buffer: buffer \"", name, "\" of ", this->name(), " is undefined");
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  LOCKSTEP_CHECK(module != nullptr, "register_module: module \"", name, "\" of ", this->name(), " is null");
  children_.emplace_back(name, std::move(module));
}

std::shared_ptr<Module> Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  LOCKSTEP_CHECK(module != nullptr, "replace_module: the new module \"", name, "\" of ", this->name(), " is null");
  for (auto& entry : children_) {
    if (entry.first != name) continue;
    // The hook first: if it refuses the new module, the tree is still as it was.
    on_module_replaced(name, module);
    std::shared_ptr<Module> old = std::move(entry.second);
    entry.second = std::move(module);
    return old;
  }
  std::string names;
  for (const auto& entry : children_) names += (names.empty() ? "\"" : ", \"") + entry.first + "\"";
  throw Error("replace_module: " + this->name() + " has no child module named \"" + name + "\" (its children: " +
              (names.empty() ? std::string("none") : names) + ")");
}

void Module::on_module_replaced(const std::string& /*name*/, const std::shared_ptr<Module>& /*module*/) {}

// ---- walking the tree ----------------------------------------------------------------------

void Module::collect(const std::string& prefix, bool want_parameters, NamedTensors& out) const {
  for (const auto& [name, tensor] : want_parameters ? parameters_ : buffers_) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", want_parameters, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors all;
  collect("", true, all);
  return without_repeats(all);
}

NamedTensors Module::named_buffers() const {
  NamedTensors all;
  collect("", false, all);
  return without_repeats(all);
}

std::vector<Tensor> Module::parameters() const { return tensors_of(named_parameters()); }
std::vector<Tensor> Module::buffers() const { return tensors_of(named_buffers()); }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> modules;
  for (const auto& entry : children_) modules.push_back(entry.second);
  return modules;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

int64_t Module::num_parameters() const {
  int64_t count = 0;
  for (const Tensor& p : parameters()) count += p.numel();
  return count;
}

// ---- modes and gradients -------------------------------------------------------------------

void Module::train(bool mode) {
  training_ = mode;
  for (const auto& entry : children_) entry.second->train(mode);
}

void Module::zero_grad(bool set_to_none) { lockstep::zero_grad(parameters(), set_to_none); }

// ---- moving and converting -----------------------------------------------------------------

void Module::convert_in_place(bool floating_only, const std::function<Tensor(const Tensor&)>& convert) {
  std::vector<Tensor> tensors = parameters();
  const size_t parameter_count = tensors.size();
  for (const Tensor& b : buffers()) tensors.push_back(b);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (floating_only && !is_floating(t.dtype())) continue;
    // Convert a detached handle (no graph is recorded); Tensor::to returns its argument when
    // nothing needs to change, and then t is left alone.
    const Tensor data = t.detach();
    const Tensor converted = convert(data);
    if (converted.is_same(data)) continue;
    // set_data swaps the data under the same handle (and drops the grad: convert it too).
    const Tensor grad = t.grad();
    t.set_data(converted);
    if (i < parameter_count) t.storage()->set_category(MemoryCategory::parameters);
    if (grad.defined()) {
      t.set_grad(convert(grad));
      t.grad().storage()->set_category(MemoryCategory::gradients);
    }
  }
}

Module& Module::to(Device device) {
  convert_in_place(false, [&](const Tensor& t) { return t.to(device); });
  return *this;
}

Module& Module::to(DType dtype) {
  LOCKSTEP_CHECK(is_floating(dtype), "Module::to: expected a floating-point dtype (f32, f64, f16 or bf16), got ",
                 dtype_name(dtype), "; a module's integer buffers keep their own dtype");
  convert_in_place(true, [&](const Tensor& t) { return t.to(dtype); });
  return *this;
}

// ---- saving and loading --------------------------------------------------------------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  // Detached, as PyTorch's: the same memory, outside autograd.
  for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor.detach());
  for (const auto& [name, tensor] : buffers_) out.emplace_back(prefix + name, tensor.detach());
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

StateDict Module::state_dict() const {
  StateDict state;
  collect_state("", state);
  return state;
}

IncompatibleKeys Module::load_state_dict(const StateDict& state, bool strict) {
  std::map<std::string, Tensor> incoming;
  for (const auto& [key, tensor] : state) incoming.emplace(key, tensor);

  // Match the module's keys against the state dict's, checking every pair before copying any.
  IncompatibleKeys result;
  std::vector<std::string> errors;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
  std::set<std::string> own_keys;
  for (const auto& [key, dst] : state_dict()) {
    own_keys.insert(key);
    const auto found = incoming.find(key);
    if (found == incoming.end()) {
      result.missing_keys.push_back(key);
      continue;
    }
    const Tensor& src = found->second;
    if (!src.defined()) {
      errors.push_back("the state_dict's tensor for " + key + " is undefined.");
    } else if (src.shape() != dst.shape()) {
      errors.push_back("size mismatch for " + key + ": copying a param with shape " + shape_str(src.shape()) +
                       " from checkpoint, the shape in current model is " + shape_str(dst.shape()) + ".");
    } else if (is_floating(src.dtype()) != is_floating(dst.dtype())) {
      errors.push_back("dtype mismatch for " + key + ": cannot copy a " + dtype_name(src.dtype()) +
                       " tensor into the model's " + dtype_name(dst.dtype()) + " one.");
    } else {
      copies.emplace_back(dst, src);
    }
  }
  for (const auto& entry : state) {
    if (!own_keys.count(entry.first)) result.unexpected_keys.push_back(entry.first);
  }

  // As PyTorch: strict loads name the missing keys first, then the unexpected ones.
  if (strict && !result.unexpected_keys.empty()) errors.insert(errors.begin(), key_list("Unexpected", result.unexpected_keys));
  if (strict && !result.missing_keys.empty()) errors.insert(errors.begin(), key_list("Missing", result.missing_keys));
  if (!errors.empty()) {
    std::string message = "load_state_dict: Error(s) in loading state_dict for " + name() + ":";
    for (const std::string& error : errors) message += "\n\t" + error;
    throw Error(message);
  }

  NoGradGuard no_grad;
  for (const auto& [dst, src] : copies) dst.copy_(src.to(dst.device()));
  return result;
}

// ---- printing ------------------------------------------------------------------------------

Tensor Module::operator()(const Tensor& input) {
  const RecordFunction span([this] { return name() + ".forward"; }, "module");
  for (const auto& [handle, hook] : forward_pre_hooks_) hook(*this, input);
  Tensor output = forward(input);
  for (const auto& [handle, hook] : forward_hooks_) output = hook(*this, input, output);
  return output;
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  forward_pre_hooks_.emplace_back(next_hook_, std::move(hook));
  return next_hook_++;
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  forward_hooks_.emplace_back(next_hook_, std::move(hook));
  return next_hook_++;
}

void Module::remove_forward_hook(HookHandle handle) {
  const auto erase = [handle](auto& hooks) {
    const auto found = std::find_if(hooks.begin(), hooks.end(), [handle](const auto& h) { return h.first == handle; });
    if (found == hooks.end()) return false;
    hooks.erase(found);
    return true;
  };
  LOCKSTEP_CHECK(erase(forward_pre_hooks_) || erase(forward_hooks_), "remove_forward_hook: ", name(),
                 " has no forward hook with handle ", handle, " (already removed?)");
}

std::string Module::name() const {
  // typeid gives the mangled name ("N8lockstep6LinearE"); the C++ ABI turns it back into
  // "lockstep::Linear", and the namespaces are dropped.
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 ? demangled : mangled;
  std::free(demangled);
  const size_t template_start = full.find('<');
  const size_t last_scope = full.rfind("::", template_start);
  return last_scope == std::string::npos ? full : full.substr(last_scope + 2);
}

std::string Module::str() const {
  // The same layout as PyTorch's Module.__repr__: settings on one line when there are no
  // children, otherwise one indented line per setting and per child.
  const std::string extra = extra_repr();
  std::vector<std::string> lines;
  std::istringstream extra_lines(extra);
  for (std::string line; std::getline(extra_lines, line);) lines.push_back(line);
  const size_t extra_count = lines.size();
  for (const auto& [child_name, child] : children_) lines.push_back("(" + child_name + "): " + indent_child(child->str()));

  std::string text = name() + "(";
  if (extra_count == 1 && children_.empty()) {
    text += lines[0];
  } else if (!lines.empty()) {
    for (const std::string& line : lines) text += "\n  " + line;
    text += "\n";
  }
  return text + ")";
}

std::string Module::format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The fewest significant digits that read back as the same double, as Python's repr uses.
  char buffer[40];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*e", digits - 1, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::snprintf(buffer, sizeof buffer, "%.*e", digits - 1, value);
  const int exponent = std::atoi(std::strchr(buffer, 'e') + 1);
  // Python writes 1e-05 and 1e+16 in scientific notation and everything between as a decimal
  // that always shows a fractional part (2.0, 0.001).
  if (exponent < -4 || exponent >= 16) return buffer;
  std::snprintf(buffer, sizeof buffer, "%.*f", std::max(0, digits - 1 - exponent), value);
  std::string text = buffer;
  if (text.find('.') == std::string::npos) text += ".0";
  return text;
}

std::shared_ptr<Module> Module::clone_structure() const {
  throw Error(name() + " cannot be replicated: override clone_structure() in " + name() +
              " to return a new " + name() + " built with the same settings (DataParallel builds its replicas with it)");
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << module.str(); }

}  // namespace lockstep
