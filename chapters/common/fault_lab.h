/// \file
/// Chapter 4's fault lab: flags that make one rank of a job misbehave in the classic ways a
/// data-parallel job goes wrong, so that a reader sees, with real output, what each does and
/// the message Lockstep prints for it (the chapter's "Questions users ask" shows each):
///
///     --fault freeze             rank R stops itself (SIGSTOP) before step N: the watchdog
///     --fault kill               rank R dies (SIGKILL) before step N: mpirun ends the job
///     --fault skip-backward      rank R skips backward at step N: its all-reduces go missing
///     --fault uneven             rank R runs out of batches before step N (try --join;
///                                whole epochs only, without --max-steps)
///     --fault seed               rank R is started with another --seed: stopped at start
///     --fault unused-parameter   every rank's model has a layer its forward never uses (try
///                                --find-unused-parameters)
///
/// R is --fault-rank (default 1) and N is --fault-step (default 3), counted from 1 in every
/// epoch. A fault never changes what the other ranks do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "nn/module.h"

namespace lockstep {

/// The fault lab's flags.
struct FaultFlags {
  std::string fault = "none";  ///< none, freeze, kill, skip-backward, uneven, seed or unused-parameter
  int rank = 1;                ///< the rank that misbehaves
  int64_t step = 3;            ///< the step of each epoch, from 1, at which it does
};

/// Adds --fault, --fault-rank and --fault-step to `app`.
void add_fault_flags(CLI::App& app, FaultFlags& flags);

/// The faults of one rank: what this rank does differently, asked at each point where a fault
/// can strike. With --fault none every answer is "as usual".
class FaultLab {
 public:
  /// The lab of rank `rank` of `world_size` in a run limited to `max_steps` (0: none). An error
  /// if --fault-rank names no rank of the job, or for --fault uneven with a step limit: a rank
  /// that ran out of batches would count fewer steps and start another epoch alone.
  FaultLab(const FaultFlags& flags, int rank, int world_size, int64_t max_steps);

  /// The seed this rank uses: `seed`, or `seed + 1` on the faulty rank with --fault seed.
  uint64_t seed(uint64_t seed) const;
  /// `model`, or with --fault unused-parameter (on every rank, as a model's own code would)
  /// `model` inside a wrapper that also owns a layer its forward never calls.
  std::shared_ptr<Module> model(std::shared_ptr<Module> model) const;
  /// Called before step `step` of an epoch (from 1). Returns true if this rank has run out of
  /// batches there (--fault uneven). With --fault freeze the faulty rank stops itself here
  /// (SIGSTOP) and goes on only if sent SIGCONT; with --fault kill it dies (SIGKILL).
  bool runs_out_before(int64_t step) const;
  /// Whether this rank skips backward at step `step` of an epoch (--fault skip-backward).
  bool skips_backward(int64_t step) const;
  /// Whether the run's collectives fall out of step on purpose (--fault skip-backward; the
  /// same answer on every rank): then a check of its own at each step boundary, as the
  /// preemption watch's, would stop the job before the lab shows what it is about.
  bool unpairs_collectives() const;

 private:
  bool strikes(const char* fault) const { return flags_.fault == fault && rank_ == flags_.rank; }
  FaultFlags flags_;
  int rank_;
};

}  // namespace lockstep
