/// \file
/// Fully sharded data parallelism (FSDP, ZeRO stage 3) after PyTorch's FSDP2 `fully_shard`:
/// between their uses, each rank keeps only a shard of every parameter, of its gradient and of
/// the optimiser's state for it, and whole parameters exist only for the unit (a block, a layer)
/// that is computing.
///
///     for (auto& block : blocks) units.push_back(fully_shard(block));   // bottom-up,
///     auto root = fully_shard(model);                                   // then the root
///     Adam opt(root->parameters(), AdamOptions(1e-3));                  // the shards
///     loss = cross_entropy((*model)(x), y);   // each unit: all-gather, forward, free
///     loss.backward();                        // each unit: all-gather, backward, reduce-scatter
///     opt.step();                             // this rank's shards only, no collective
///
/// Each parameter is sharded on dim 0: its rows are padded to a multiple of the world size N and
/// rank r keeps rows [r*R, (r+1)*R), R = ceil(rows / N). A unit's shards lie end to end in one
/// flat f32 buffer, and the sharded parameters the optimiser steps are views of it: the master
/// weights, with nothing copied. One all-gather of that buffer fills the unit's whole parameters;
/// one reduce-scatter of the unit's gradients leaves each rank the average of its shard's:
///
///     flat shard of rank r:  [ w1 rows r*R1.. | w2 rows r*R2.. | ... ]          (S elements)
///     all-gather:            [ rank 0's S | rank 1's S | ... ]  -> copied out into w1, w2, ...
///     reduce-scatter:        every rank's [ grads laid out as the gather ] -> this rank's S
///
/// The whole parameters are the module's own registered tensors, so its forward runs unchanged.
/// Between uses their storage is freed (Storage::resize(0)) while the tensors live on: autograd's
/// saved tensors point at that same storage, which is why the all-gather before a unit's backward
/// refills it, and puts the version count back, so that the saved tensors accept the values
/// they saved (see unshard()). Forward and backward hooks (nn/module.h, and a node threaded into
/// the unit's output) start each collective at its moment.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "distributed/process_group.h"
#include "distributed/work.h"
#include "nn/module.h"
#include "nn/state_dict.h"

namespace lockstep {

/// FSDP2's MixedPrecisionPolicy: the dtype a unit's parameters are gathered and computed in, and
/// the dtype its gradients are reduced in. The sharded master weights stay f32 either way.
struct MixedPrecisionPolicy {
  /// Gather (and so compute) in this dtype, f16 or bf16; none: the parameters' own, f32.
  std::optional<DType> param_dtype;
  /// Reduce-scatter gradients in this dtype; none: param_dtype's (f32 gives f32 averages of
  /// 16-bit gradients, the common choice).
  std::optional<DType> reduce_dtype;
};

/// The options of fully_shard, as FSDP2's keyword arguments.
class FullyShardOptions {
 public:
  /// Free the unit's whole parameters after its forward and gather them again before its
  /// backward (default true: ZeRO-3's memory). False keeps them from forward to backward: one
  /// all-gather fewer per step for the memory of ZeRO-2 (FSDP1's SHARD_GRAD_OP). The root unit
  /// never frees them after forward: its backward comes at once.
  FullyShardOptions& reshard_after_forward(bool value) { reshard_after_forward_ = value; return *this; }
  /// The mixed-precision policy (default: everything in f32).
  FullyShardOptions& mp_policy(MixedPrecisionPolicy value) { mp_policy_ = value; return *this; }
  /// Whether the unit's parameters are freed after forward.
  bool reshard_after_forward() const { return reshard_after_forward_; }
  /// The mixed-precision policy.
  const MixedPrecisionPolicy& mp_policy() const { return mp_policy_; }

 private:
  bool reshard_after_forward_ = true;
  MixedPrecisionPolicy mp_policy_;
};

/// One unit of FSDP: a module whose parameters (those not in a unit below it) are sharded and
/// gathered together. fully_shard returns it; the module keeps it alive (its forward hooks hold
/// it), as PyTorch keeps FSDP's state on the module object.
class FSDPModule : public std::enable_shared_from_this<FSDPModule> {
 public:
  /// Use fully_shard.
  FSDPModule(Module& module, FullyShardOptions options, ProcessGroup& group);
  ~FSDPModule();
  FSDPModule(const FSDPModule&) = delete;             ///< One unit per module.
  FSDPModule& operator=(const FSDPModule&) = delete;  ///< One unit per module.

  /// The module this unit shards.
  Module& module() { return *module_; }
  /// The unit's name in traces and collective names: its path from the root ("layer1.0"), or
  /// the module's class name for the root (and for a unit no parent has adopted yet).
  const std::string& name() const { return name_; }
  /// Whether no unit above this one was made (the root starts and ends each step).
  bool is_root() const { return parent_ == nullptr; }

  /// The sharded parameters of this unit and of every unit below it, in the order of
  /// module().parameters(): the i-th is this rank's shard (R rows, f32) of the i-th parameter.
  /// These, not module().parameters(), go to the optimiser (FSDP2's DTensor parameters).
  std::vector<Tensor> parameters() const;
  /// parameters() with the module's dotted names.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;

  /// Starts the all-gather of this unit's whole parameters, unless they are whole or on the way
  /// (FSDP2's unshard(async_op=True)); the next forward or backward of the unit waits for it.
  /// A collective: every rank must start the same all-gathers in the same order.
  void unshard();
  /// Frees this unit's whole parameters, keeping the shards (FSDP2's reshard()).
  void reshard();
  /// Changes reshard_after_forward (FullyShardOptions).
  void set_reshard_after_forward(bool value) { options_.reshard_after_forward(value); }
  /// Units whose all-gather this unit's forward starts as soon as its own has arrived, so that
  /// it travels while this unit computes (FSDP2's explicit forward prefetch): usually the next
  /// unit to run. Every rank must set the same.
  void set_modules_to_forward_prefetch(std::vector<std::shared_ptr<FSDPModule>> units);
  /// The same before this unit's backward: usually the unit whose backward comes next, the one
  /// that ran before it in forward.
  void set_modules_to_backward_prefetch(std::vector<std::shared_ptr<FSDPModule>> units);

  /// Scales the sharded gradients of this unit and those below so that the norm of all of them
  /// together, the whole model's gradient norm, is at most `max_norm`; returns the norm before
  /// (FSDP1's FullyShardedDataParallel.clip_grad_norm_). Each rank sums its shards' squares and
  /// one all-reduce adds the ranks' sums: the norm DDP's clip_grad_norm_ finds, up to the order
  /// of additions. A collective.
  double clip_grad_norm_(double max_norm);

  /// The whole model's state dict with the keys of the unsharded module, its parameters
  /// all-gathered from the f32 shards (new tensors) and its buffers as this rank holds them
  /// (PyTorch's get_model_state_dict with full_state_dict=True). Every rank receives it; rank 0
  /// saves it. A collective.
  StateDict full_state_dict();
  /// Takes this rank's shard of every parameter from a whole state dict with the unsharded
  /// module's keys (full_state_dict's, or one saved from the plain model) and copies the buffers
  /// in; the whole parameters stay freed. With `strict`, as Module::load_state_dict, a missing or
  /// unexpected key is an error. No collective.
  void load_full_state_dict(const StateDict& state, bool strict = true);

 private:
  friend std::shared_ptr<FSDPModule> fully_shard(const std::shared_ptr<Module>& module, FullyShardOptions options);
  struct ShardedParam;   // one parameter: its whole tensor, its shard, where the shard lies
  struct Gather;         // an all-gather in flight
  struct Reduction;      // a reduce-scatter in flight

  // Sets up the shards of `params`, adopting `children` as the units below.
  void shard(const std::vector<std::pair<std::string, Tensor>>& params,
             std::vector<std::shared_ptr<FSDPModule>> children);
  // This unit and every unit below it, parents before children.
  std::vector<FSDPModule*> all_units();
  // The unit at the top.
  FSDPModule& root();
  // Waits for this unit's all-gather and copies it out into the whole parameters.
  void wait_for_unshard();
  // The hooks around the module's forward.
  void pre_forward();
  Tensor post_forward(const Tensor& output);
  // Runs once per backward, before the unit's first backward node.
  void pre_backward();
  // One of the unit's parameters has its whole gradient.
  void on_gradient_ready();
  // Every gradient of the unit is complete: reduce-scatter them, free them and the parameters.
  void post_backward();
  // Waits for this unit's reduce-scatter and hands its averages to the shards' grad().
  void finish_reduction();
  // The end of the backward pass (root only): what is still in flight, and the step's state.
  void finalize_backward();
  // The dtype whole parameters and their gradients have.
  DType compute_dtype() const;
  DType reduce_dtype() const;

  Module* module_;                    // owns this unit (through its hooks)
  FullyShardOptions options_;
  ProcessGroup& group_;
  std::string name_;
  FSDPModule* parent_ = nullptr;
  std::vector<std::shared_ptr<FSDPModule>> children_;
  std::vector<ShardedParam> params_;
  Tensor flat_shard_;                 // (S,) f32: this rank's shards of the unit's parameters
  std::unique_ptr<Gather> gather_;    // the all-gather in flight, if any
  std::unique_ptr<Reduction> reduction_;  // the reduce-scatter in flight, if any
  bool unsharded_ = false;            // the whole parameters hold their values
  bool backward_started_ = false;     // pre_backward ran in this backward
  bool reduced_ = false;              // post_backward ran in this backward
  int gradients_ready_ = 0;           // parameters whose whole gradient is complete
  FSDPModule* last_reduced_ = nullptr;  // root only: the unit whose reduce-scatter went last
  std::vector<std::weak_ptr<FSDPModule>> forward_prefetch_, backward_prefetch_;
};

/// Makes `module` a unit of fully sharded data parallelism (FSDP2's fully_shard): every
/// parameter of its subtree not already in a unit is sharded across the default process group's
/// ranks, and the units already made inside it become its children. Apply it bottom-up: to each
/// block, then to the model. The parameters are first made rank 0's on every rank (FSDP1's
/// sync_module_states) and checked to have one shape on every rank. They must be f32, each with
/// its own storage, and no optimiser may hold them yet. A collective: every rank calls it.
std::shared_ptr<FSDPModule> fully_shard(const std::shared_ptr<Module>& module, FullyShardOptions options = {});

}  // namespace lockstep
