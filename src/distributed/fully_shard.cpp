#include "distributed/fully_shard.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/flat_shard.h"
#include "distributed/init_process_group.h"
#include "distributed/rank_agreement.h"
#include "tensor/autograd/engine.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "util/trace.h"

namespace lockstep {

// One parameter of the unit. Its rows are cut into N shards of R rows (the last ones padded);
// rank r's shard lies at `offset` in every rank's flat shard, and rank r's block of an
// all-gather or a reduce-scatter input holds rank r's rows there.
struct FSDPModule::ShardedParam {
  std::string name;       // in the unit's module
  Tensor whole;           // the module's parameter: (rows, ...), storage freed between uses
  Tensor shard;           // (R, ...) f32 view of flat_shard_: the leaf the optimiser steps
  int64_t rows = 0;       // whole.size(0) (1 for a 0-dim parameter)
  int64_t inner = 0;      // elements per row
  int64_t shard_rows = 0; // R = ceil(rows / N)
  int64_t offset = 0;     // of the shard in the flat shard, in elements
  HookHandle hook = 0;    // the post-accumulate-grad hook on `whole`

  // How many of rank r's R rows are real rows, not padding.
  int64_t rows_of(int r) const { return std::clamp<int64_t>(rows - r * shard_rows, 0, shard_rows); }
  // Rank r's real rows of a (rows, inner) tensor, and where they lie in rank r's block of a
  // flat (N * S) buffer: the two ends of every copy in and out of a collective.
  Tensor rows_in_whole(const Tensor& whole2d, int r) const {
    return whole2d.slice(0, r * shard_rows, r * shard_rows + rows_of(r));
  }
  Tensor rows_in_flat(const Tensor& flat, int r, int64_t shard_numel) const {
    const int64_t begin = r * shard_numel + offset;
    return flat.slice(0, begin, begin + rows_of(r) * inner).view({rows_of(r), inner});
  }
};

struct FSDPModule::Gather {
  Tensor input;   // (S,) this rank's flat shard, in the compute dtype
  Tensor output;  // (N * S,) every rank's, rank 0's first
  std::shared_ptr<Work> work;
};

struct FSDPModule::Reduction {
  Tensor input;   // (N * S,) this rank's gradients divided by N, laid out as a gather's output
  Tensor output;  // (S,) the sum over ranks of this rank's block: the averages of its shards
  std::shared_ptr<Work> work;
};

namespace {

// Which modules are units: PyTorch keeps this on the module object; here a table, so that
// fully_shard on a parent finds the units made inside it.
std::mutex registry_mutex;
std::unordered_map<const Module*, std::weak_ptr<FSDPModule>>& registry() {
  static std::unordered_map<const Module*, std::weak_ptr<FSDPModule>> units;
  return units;
}

std::shared_ptr<FSDPModule> unit_of(const Module* module) {
  const std::lock_guard<std::mutex> lock(registry_mutex);
  const auto found = registry().find(module);
  return found == registry().end() ? nullptr : found->second.lock();
}

// The units nearest below `module` (a unit's own units are its business), with their paths.
void find_units(const Module& module, const std::string& prefix,
                std::vector<std::pair<std::string, std::shared_ptr<FSDPModule>>>& out) {
  for (const auto& [name, child] : module.named_children()) {
    const std::string path = prefix + name;
    if (auto unit = unit_of(child.get())) {
      out.emplace_back(path, std::move(unit));
    } else {
      find_units(*child, path + ".", out);
    }
  }
}

// A hook's unit, which must still exist.
std::shared_ptr<FSDPModule> alive(const std::weak_ptr<FSDPModule>& unit, const std::string& module_name) {
  auto locked = unit.lock();
  LOCKSTEP_CHECK(locked != nullptr, "the FSDPModule that fully_shard returned for ", module_name,
                 " no longer exists, but its parameters are still sharded: keep the root's FSDPModule for as long as "
                 "the model is used");
  return locked;
}

// "a, b, c".
std::string comma_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

FSDPModule::FSDPModule(Module& module, FullyShardOptions options, ProcessGroup& group)
    : module_(&module), options_(options), group_(group), name_(module.name()) {}

// Runs while the module that owns this unit is destroyed: module_ must not be used.
FSDPModule::~FSDPModule() {
  for (const ShardedParam& p : params_) p.whole.remove_hook(p.hook);
  const std::lock_guard<std::mutex> lock(registry_mutex);
  const auto found = registry().find(module_);
  if (found != registry().end() && found->second.expired()) registry().erase(found);
}

DType FSDPModule::compute_dtype() const { return options_.mp_policy().param_dtype.value_or(DType::f32); }

DType FSDPModule::reduce_dtype() const { return options_.mp_policy().reduce_dtype.value_or(compute_dtype()); }

void FSDPModule::shard(const std::vector<std::pair<std::string, Tensor>>& params,
                       std::vector<std::shared_ptr<FSDPModule>> children) {
  const int world = group_.size(), rank = group_.rank();
  const Device device = params.empty() ? Device::cpu() : params.front().second.device();
  for (const auto& [name, p] : params) {
    LOCKSTEP_CHECK(p.dtype() == DType::f32, "fully_shard: parameter \"", name, "\" of ", module_->name(), " is ",
                   dtype_name(p.dtype()), "; the shards are the f32 master weights, so build the model in f32 and "
                   "ask for 16-bit compute with MixedPrecisionPolicy");
    LOCKSTEP_CHECK(p.numel() > 0, "fully_shard: parameter \"", name, "\" of ", module_->name(), " is empty");
    LOCKSTEP_CHECK(p.is_contiguous() && p.offset() == 0 && p.storage()->nbytes() == static_cast<size_t>(p.nbytes()),
                   "fully_shard: parameter \"", name, "\" of ", module_->name(), " shares its memory with other "
                   "tensors; FSDP frees each parameter's memory between uses, so each needs its own");
  }
  // Every rank must cut the same shapes: compare them, then start from rank 0's values.
  std::vector<uint64_t> shapes;
  for (const auto& [name, p] : params) shapes.push_back(fnv1a(p.shape().data(), p.shape().size() * sizeof(int64_t)));
  shapes.push_back(static_cast<uint64_t>(params.size()));
  {
    const CollectiveCaller caller("FSDP: compare parameter shapes");
    if (const auto differ = find_disagreement(group_, shapes, device)) {
      LOCKSTEP_CHECK(differ->item >= params.size(), "fully_shard: parameter \"", params[differ->item].first, "\" of ",
                     module_->name(), " differs in shape between rank 0 and rank(s) ", rank_list(differ->ranks),
                     "; on this rank it is ", shape_str(params[differ->item].second.shape()),
                     ". Every rank must build the same model");
      LOCKSTEP_FAIL("fully_shard: ", module_->name(), " has a different number of parameters on rank(s) ",
                    rank_list(differ->ranks), " than on rank 0 (", params.size(), " here); every rank must build "
                    "the same model and apply fully_shard to the same modules");
    }
  }
  {
    const CollectiveCaller caller("FSDP: broadcast parameters");
    for (const auto& [name, p] : params) group_.broadcast(p, 0);
  }

  // Lay the shards end to end: this rank's rows of each parameter, padding zero.
  int64_t total = 0;
  for (const auto& [name, p] : params) {
    ShardedParam sp;
    sp.name = name;
    sp.whole = p;
    sp.rows = p.dim() == 0 ? 1 : p.size(0);
    sp.inner = p.numel() / sp.rows;
    sp.shard_rows = shard_numel(sp.rows, world);
    sp.offset = total;
    total += sp.shard_rows * sp.inner;
    params_.push_back(std::move(sp));
  }
  const NoGradGuard no_grad;
  flat_shard_ = zeros({total}, TensorOptions().device(device));
  flat_shard_.storage()->set_category(MemoryCategory::parameters);  // the master weights
  for (ShardedParam& sp : params_) {
    Shape shape = sp.whole.shape();
    if (shape.empty()) shape.push_back(1);
    shape[0] = sp.shard_rows;
    sp.shard = flat_shard_.slice(0, sp.offset, sp.offset + sp.shard_rows * sp.inner).view(shape);
    if (sp.rows_of(rank) > 0) {
      sp.shard.view({sp.shard_rows, sp.inner}).slice(0, 0, sp.rows_of(rank))
          .copy_(sp.rows_in_whole(sp.whole.view({sp.rows, sp.inner}), rank));
    }
    sp.shard.requires_grad_(true);
    // The whole parameter now only ever holds gathered values, in the compute dtype.
    if (compute_dtype() != DType::f32) sp.whole.set_data(empty(sp.whole.shape(), sp.whole.options().dtype(compute_dtype())));
    sp.whole.storage()->resize(0);
    sp.whole.storage()->set_category(MemoryCategory::unsharded_parameters);
    sp.hook = sp.whole.register_post_accumulate_grad_hook([self = weak_from_this(), owner = module_->name()](const Tensor&) {
      alive(self, owner)->on_gradient_ready();
    });
  }

  // Adopt the units below: each is named by its path from here.
  for (const auto& child : children) {
    child->parent_ = this;
    children_.push_back(child);
  }
}

std::vector<FSDPModule*> FSDPModule::all_units() {
  std::vector<FSDPModule*> units{this};
  for (const auto& child : children_) {
    const std::vector<FSDPModule*> below = child->all_units();
    units.insert(units.end(), below.begin(), below.end());
  }
  return units;
}

FSDPModule& FSDPModule::root() {
  FSDPModule* unit = this;
  while (unit->parent_ != nullptr) unit = unit->parent_;
  return *unit;
}

std::vector<std::pair<std::string, Tensor>> FSDPModule::named_parameters() const {
  // Each whole parameter has a storage of its own: it identifies the parameter.
  std::map<const Storage*, Tensor> shard_of_whole;
  for (FSDPModule* unit : const_cast<FSDPModule*>(this)->all_units()) {
    for (const ShardedParam& sp : unit->params_) shard_of_whole[sp.whole.storage().get()] = sp.shard;
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : module_->named_parameters()) out.emplace_back(name, shard_of_whole.at(p.storage().get()));
  return out;
}

std::vector<Tensor> FSDPModule::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, shard] : named_parameters()) out.push_back(shard);
  return out;
}

void FSDPModule::set_modules_to_forward_prefetch(std::vector<std::shared_ptr<FSDPModule>> units) {
  forward_prefetch_.assign(units.begin(), units.end());
}

void FSDPModule::set_modules_to_backward_prefetch(std::vector<std::shared_ptr<FSDPModule>> units) {
  backward_prefetch_.assign(units.begin(), units.end());
}

//! [unshard]
void FSDPModule::unshard() {
  if (unsharded_ || gather_ || params_.empty()) return;
  const RecordFunction span([this] { return "FSDP: start all-gather of " + name_; }, "fsdp");
  auto gather = std::make_unique<Gather>();
  const MemoryCategoryGuard category(MemoryCategory::communication_buffers);
  // 16-bit compute: the shards travel, and are gathered, in 16 bits.
  gather->input = compute_dtype() == DType::f32 ? flat_shard_ : flat_shard_.to(compute_dtype());
  gather->output = empty({group_.size() * flat_shard_.numel()}, gather->input.options());
  const CollectiveCaller caller("FSDP all-gather " + name_);
  gather->work = group_.all_gather_async(gather->output, gather->input);
  gather_ = std::move(gather);
}

void FSDPModule::wait_for_unshard() {
  if (unsharded_ || params_.empty()) return;
  unshard();
  const RecordFunction span([this] { return "FSDP: wait for all-gather of " + name_; }, "fsdp");
  gather_->work->wait();
  const NoGradGuard no_grad;
  for (const ShardedParam& sp : params_) {
    // The whole parameter gets memory again: the same Storage object, so every tensor autograd
    // saved from it in forward (a view, a detach) sees these bytes too.
    const int64_t version = sp.whole.version();
    sp.whole.storage()->resize(static_cast<size_t>(sp.whole.nbytes()));
    const Tensor whole2d = sp.whole.view({sp.rows, sp.inner});
    for (int r = 0; r < group_.size(); ++r) {
      if (sp.rows_of(r) > 0) sp.rows_in_whole(whole2d, r).copy_(sp.rows_in_flat(gather_->output, r, flat_shard_.numel()));
    }
    // They are the values forward used: the shards change only in the optimiser's step, after
    // backward. The copy counted as an in-place change; undo that, or the saved tensors would
    // refuse these values as modified (FSDP2 does the same).
    sp.whole.storage()->restore_version(version);
  }
  gather_.reset();
  unsharded_ = true;
}
//! [unshard]

void FSDPModule::reshard() {
  if (gather_) {
    gather_->work->wait();  // a prefetch that was not used: its buffers must outlive it
    gather_.reset();
  }
  for (const ShardedParam& sp : params_) sp.whole.storage()->resize(0);
  unsharded_ = false;
}

void FSDPModule::pre_forward() {
  wait_for_unshard();
  for (const auto& unit : forward_prefetch_) {
    if (auto next = unit.lock()) next->unshard();
  }
}

Tensor FSDPModule::post_forward(const Tensor& output) {
  if (!grad_mode_enabled() || !output.requires_grad()) {
    // No backward will follow: nothing to keep.
    reshard();
    return output;
  }
  if (options_.reshard_after_forward() && !is_root()) reshard();
  // Backward enters the unit through this node, before any node of the unit's own: where the
  // parameters are gathered again.
  return record(output.detach(), "FSDPPreBackward", {output},
                [self = weak_from_this(), owner = name_](const Tensor& grad) -> std::vector<Tensor> {
    alive(self, owner)->pre_backward();
    return {grad};
  });
}

void FSDPModule::pre_backward() {
  if (backward_started_) return;
  backward_started_ = true;
  // The root's node runs first in backward: the place to ask for the end of it.
  if (is_root()) {
    queue_backward_callback([self = weak_from_this(), owner = name_] { alive(self, owner)->finalize_backward(); });
  }
  wait_for_unshard();
  for (const auto& unit : backward_prefetch_) {
    if (auto next = unit.lock()) next->unshard();
  }
}

void FSDPModule::on_gradient_ready() {
  if (++gradients_ready_ == static_cast<int>(params_.size())) post_backward();
}

//! [post backward]
void FSDPModule::post_backward() {
  if (reduced_) return;
  reduced_ = true;
  if (params_.empty()) return;
  const RecordFunction span([this] { return "FSDP: start reduce-scatter of " + name_; }, "fsdp");
  // One reduce-scatter in flight at a time: the previous unit's must finish (and free its
  // buffer of whole gradients) before this one's is filled.
  FSDPModule& top = root();
  if (top.last_reduced_ != nullptr) top.last_reduced_->finish_reduction();
  const int world = group_.size();
  const int64_t shard_numel = flat_shard_.numel();
  auto reduction = std::make_unique<Reduction>();
  const MemoryCategoryGuard category(MemoryCategory::communication_buffers);
  reduction->input = zeros({world * shard_numel}, flat_shard_.options().dtype(reduce_dtype()));
  const NoGradGuard no_grad;
  for (const ShardedParam& sp : params_) {
    // A parameter unused in this forward contributes zeros, as under DDP's find_unused_parameters.
    const Tensor grad = sp.whole.grad();
    if (grad.defined()) {
      const Tensor grad2d = grad.reshape({sp.rows, sp.inner});
      for (int r = 0; r < world; ++r) {
        if (sp.rows_of(r) > 0) sp.rows_in_flat(reduction->input, r, shard_numel).copy_(sp.rows_in_whole(grad2d, r));
      }
    }
    // Only the shard of the average will be kept.
    sp.whole.set_grad(Tensor());
  }
  // Divide, then sum, as DDP's buckets do: the same averages, element by element.
  reduction->input.mul_(1.0 / world);
  reduction->output = empty({shard_numel}, reduction->input.options());
  {
    const CollectiveCaller caller("FSDP reduce-scatter " + name_);
    reduction->work = group_.reduce_scatter_async(reduction->output, reduction->input, ReduceOp::Sum);
  }
  reduction_ = std::move(reduction);
  top.last_reduced_ = this;
  // Backward is done with this unit's parameters.
  reshard();
}

void FSDPModule::finish_reduction() {
  if (!reduction_) return;
  const RecordFunction span([this] { return "FSDP: wait for reduce-scatter of " + name_; }, "fsdp");
  reduction_->work->wait();
  const NoGradGuard no_grad;
  const Tensor averages = reduction_->output.dtype() == DType::f32 ? reduction_->output : reduction_->output.to(DType::f32);
  // From here the buffer holds this rank's gradient shards.
  averages.storage()->set_category(MemoryCategory::gradients);
  for (const ShardedParam& sp : params_) {
    const Tensor mine = averages.slice(0, sp.offset, sp.offset + sp.shard_rows * sp.inner).view(sp.shard.shape());
    // Without zero_grad in between, gradients accumulate, as a plain parameter's do.
    if (sp.shard.grad().defined()) {
      sp.shard.grad().add_(mine);
    } else {
      sp.shard.set_grad(mine);
    }
  }
  reduction_.reset();
  FSDPModule& top = root();
  if (top.last_reduced_ == this) top.last_reduced_ = nullptr;
}
//! [post backward]

void FSDPModule::finalize_backward() {
  const RecordFunction span("FSDP: end of backward", "fsdp");
  const std::vector<FSDPModule*> units = all_units();
  // A unit that ran forward but some of whose parameters received no gradient was never
  // reduced: do it now, in the same order on every rank.
  for (FSDPModule* unit : units) {
    if (unit->backward_started_ && !unit->reduced_) unit->post_backward();
  }
  for (FSDPModule* unit : units) {
    unit->finish_reduction();
    // A unit that kept its parameters (reshard_after_forward false, no backward) frees them.
    unit->reshard();
    unit->backward_started_ = false;
    unit->reduced_ = false;
    unit->gradients_ready_ = 0;
  }
}

double FSDPModule::clip_grad_norm_(double max_norm) { return lockstep::clip_grad_norm_(group_, parameters(), max_norm); }

StateDict FSDPModule::full_state_dict() {
  const NoGradGuard no_grad;
  // Every whole parameter, gathered from the f32 shards (not the 16-bit compute copies).
  std::map<const Storage*, Tensor> gathered;
  for (FSDPModule* unit : all_units()) {
    if (unit->params_.empty()) continue;
    const int64_t shard_numel = unit->flat_shard_.numel();
    const Tensor all = empty({group_.size() * shard_numel}, unit->flat_shard_.options());
    {
      const CollectiveCaller caller("FSDP full_state_dict " + unit->name_);
      group_.all_gather(all, unit->flat_shard_);
    }
    for (const ShardedParam& sp : unit->params_) {
      const Tensor whole = empty(sp.whole.shape(), all.options());
      const Tensor whole2d = whole.view({sp.rows, sp.inner});
      for (int r = 0; r < group_.size(); ++r) {
        if (sp.rows_of(r) > 0) sp.rows_in_whole(whole2d, r).copy_(sp.rows_in_flat(all, r, shard_numel));
      }
      gathered[sp.whole.storage().get()] = whole;
    }
  }
  StateDict state = module_->state_dict();
  for (auto& [name, tensor] : state) {
    const auto found = gathered.find(tensor.storage().get());
    if (found != gathered.end()) tensor = found->second;
  }
  return state;
}

void FSDPModule::load_full_state_dict(const StateDict& state, bool strict) {
  const NoGradGuard no_grad;
  std::map<std::string, Tensor> given(state.begin(), state.end());
  std::map<const Storage*, const ShardedParam*> sharded;
  for (FSDPModule* unit : all_units()) {
    for (const ShardedParam& sp : unit->params_) sharded[sp.whole.storage().get()] = &sp;
  }
  // Check everything first, so that a failed load changes nothing.
  const StateDict mine = module_->state_dict();
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, tensor] : mine) {
    const auto found = given.find(name);
    if (found == given.end()) {
      missing.push_back(name);
      continue;
    }
    LOCKSTEP_CHECK(found->second.shape() == tensor.shape(), "load_full_state_dict: \"", name, "\" is ",
                   shape_str(found->second.shape()), " in the state dict but ", shape_str(tensor.shape()),
                   " in the model");
  }
  std::map<std::string, bool> known;
  for (const auto& entry : mine) known[entry.first] = true;
  for (const auto& entry : state) {
    if (!known.count(entry.first)) unexpected.push_back(entry.first);
  }
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string message = "load_full_state_dict:";
    if (!missing.empty()) message += " missing key(s) " + comma_list(missing) + ".";
    if (!unexpected.empty()) message += " unexpected key(s) " + comma_list(unexpected) + ".";
    LOCKSTEP_FAIL(message, " The state dict must come from the same model, unsharded");
  }
  const int rank = group_.rank();
  for (const auto& [name, tensor] : mine) {
    const auto found = given.find(name);
    if (found == given.end()) continue;
    const auto param = sharded.find(tensor.storage().get());
    if (param == sharded.end()) {
      tensor.copy_(found->second);  // a buffer: every rank holds it whole
      continue;
    }
    const ShardedParam& sp = *param->second;
    const Tensor source = found->second.to(sp.shard.device()).reshape({sp.rows, sp.inner});
    if (sp.rows_of(rank) > 0) {
      sp.shard.view({sp.shard_rows, sp.inner}).slice(0, 0, sp.rows_of(rank)).copy_(sp.rows_in_whole(source, rank));
    }
  }
}

std::shared_ptr<FSDPModule> fully_shard(const std::shared_ptr<Module>& module, FullyShardOptions options) {
  LOCKSTEP_CHECK(module != nullptr, "fully_shard: the module is null");
  LOCKSTEP_CHECK(unit_of(module.get()) == nullptr, "fully_shard: ", module->name(),
                 " is already a unit of FSDP; apply fully_shard once to each module");
  ProcessGroup& group = default_process_group();
  // The units already made below this module, and the parameters they do not hold.
  std::vector<std::pair<std::string, std::shared_ptr<FSDPModule>>> below;
  find_units(*module, "", below);
  std::map<const Storage*, bool> taken;
  for (const auto& [path, unit] : below) {
    for (const Tensor& p : unit->module().parameters()) taken[p.storage().get()] = true;
  }
  std::vector<std::pair<std::string, Tensor>> own;
  for (const auto& [name, p] : module->named_parameters()) {
    if (!taken.count(p.storage().get()) && p.requires_grad()) own.emplace_back(name, p);
  }

  auto unit = std::make_shared<FSDPModule>(*module, options, group);
  std::vector<std::shared_ptr<FSDPModule>> children;
  for (const auto& [path, child] : below) {
    // Name the units below by their path from here: "layer1.0", "layer1.0.block".
    for (FSDPModule* u : child->all_units()) u->name_ = u == child.get() ? path : path + "." + u->name_;
    children.push_back(child);
  }
  unit->shard(own, std::move(children));

  // The hooks, which own the unit: gather before forward; free after it, and thread in the node
  // that gathers again before backward.
  module->register_forward_pre_hook([unit](Module&, const Tensor&) { unit->pre_forward(); });
  module->register_forward_hook([unit](Module&, const Tensor&, const Tensor& output) { return unit->post_forward(output); });
  const std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[module.get()] = unit;
  return unit;
}

}  // namespace lockstep
