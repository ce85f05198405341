/// \file
/// Preemption that saves: a job told to stop by a signal finishes the step it is in, agrees
/// with every other rank on the step to stop after, and ends with exit status
/// kPreemptedExitStatus instead of dying mid-step, so that chapter 6 can write a checkpoint
/// first and print the command that resumes.
///
/// Which signals, and who sends them:
///
///     SIGUSR1   the warning a user asks of Slurm (`sbatch --signal=B:USR1@90`: 90 s before the
///               time limit or a preemption); Open MPI's mpirun forwards SIGUSR1 and SIGUSR2 to
///               every rank
///     SIGTERM   what Slurm sends every task when it preempts or cancels a job (then SIGKILL,
///               KillWait seconds later); mpirun itself, given SIGTERM or SIGINT, sends SIGTERM
///               to the ranks and SIGKILL about a second later
///     SIGINT    Ctrl-C in the terminal of a job run without mpirun
///
/// The handler only sets a flag (all a signal handler may safely do); the training loop reads
/// it at each step boundary, and an all-reduce (max) of that flag over the ranks makes every
/// rank stop after the same step, whichever rank got the signal and whenever: a signal
/// received during step s stops the job after step s. The all-reduce runs on a process group
/// of its own (new_group), so it never pairs with the training's own collectives, and it
/// blocks: at a step boundary the ranks have just met in the step's gradient all-reduce, so the
/// wait is short, while the same all-reduce left running on the group's worker thread would
/// take the CPU from the next step's compute. A second signal ends the process at once, as the
/// signal would have without a handler.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace lockstep {

/// The exit status of a run that stopped because it was told to (EX_TEMPFAIL of sysexits.h:
/// "a temporary failure; try again later"). A batch script can requeue on it
/// (`[ $? -eq 75 ] && scontrol requeue $SLURM_JOB_ID`).
constexpr int kPreemptedExitStatus = 75;

/// The signal half of PreemptionWatch: handlers for SIGUSR1, SIGTERM and SIGINT from
/// construction to destruction (one at a time per process; the previous handlers come back
/// with the destructor). The first signal is noted; a second one ends the process at once.
class StopSignals {
 public:
  /// Installs the handlers, with nothing received yet.
  StopSignals();
  /// Restores the handlers that were there before.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  /// The first signal received since construction (SIGUSR1, SIGTERM or SIGINT), or 0.
  int received() const;
};

/// Stops every rank of a job after the same step once any of them has received a stop signal
/// (see the file comment).
class PreemptionWatch {
 public:
  /// Installs the handlers (StopSignals) and creates the watch's process group (new_group).
  /// Collective: every rank constructs it at the same point, after init_process_group, with
  /// the same `enabled`. A watch that is not enabled does neither, and never stops the job: for
  /// the fault lab's runs whose collectives fall out of step on purpose
  /// (FaultLab::unpairs_collectives), which the watch's own all-reduce would otherwise catch.
  explicit PreemptionWatch(bool enabled = true);

  /// Whether the job stops at this step boundary: the same answer on every rank, true once any
  /// rank has received a signal before it. Every rank calls it at every step boundary, the
  /// same number of times; once true, it stays true.
  bool should_stop();

  /// The signal that stopped the job as this rank saw it ("SIGUSR1", "SIGTERM", "SIGINT"), or
  /// "another rank's signal" when this rank got none.
  std::string reason() const;

 private:
  std::optional<StopSignals> signals_;  // none when not enabled
  ProcessGroup* group_ = nullptr;       // the watch's own group
  bool stopping_ = false;
};

/// The command that resumes a stopped run: the program and its flags as given (`args`:
/// argv[0] first), with any `--resume` replaced by `--resume checkpoint`, after `mpirun -n
/// world_size` when the job has more than one rank. Arguments are quoted for a POSIX shell
/// where they need it.
std::string resume_command(const std::vector<std::string>& args, int world_size, const std::string& checkpoint);

}  // namespace lockstep
