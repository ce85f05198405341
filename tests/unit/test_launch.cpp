// Launch: which launcher started this process and what it says (detect_launch, from a made-up
// environment) and which backend a job gets (choose_backend). No MPI is started here: these are
// plain functions of their arguments. (Which GPU a rank uses is the programs' choice:
// chapters/common/device_choice, tested in test_device_choice.cpp.)
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "test_util.h"

namespace lockstep {
namespace {

using test::expect_error;

// detect_launch as it would run in an environment holding exactly `variables`.
LaunchInfo launch_in(const std::map<std::string, std::string>& variables) {
  return detect_launch([&](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

// rank, world size, local rank and local world size, in that order.
void expect_launch(const LaunchInfo& info, const std::string& launcher, int rank, int world, int local_rank,
                   int local_world) {
  EXPECT_EQ(info.launcher, launcher);
  EXPECT_EQ(info.rank, rank);
  EXPECT_EQ(info.world_size, world);
  EXPECT_EQ(info.local_rank, local_rank);
  EXPECT_EQ(info.local_world_size, local_world);
}

TEST(DetectLaunch, EachLaunchersVariables) {
  expect_launch(launch_in({}), "none", 0, 1, 0, 1);
  expect_launch(launch_in({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                "openmpi", 3, 8, 1, 2);
  expect_launch(launch_in({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}}),
                "mpich", 5, 6, 2, 3);
  expect_launch(launch_in({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}),
                "torchrun", 1, 4, 1, 2);
  expect_launch(launch_in({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                           {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NODEID", "1"}}),
                "slurm", 5, 8, 1, 4);
}

// Slurm lists every node's task count, runs compressed ("2(x3),1" is 2, 2, 2, 1); this node's
// entry is the local world size. The step's list (srun) wins over the job's (a batch script).
TEST(DetectLaunch, SlurmCountsTheTasksOnThisNode) {
  const auto local_world = [](const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"}};
    env.insert(extra.begin(), extra.end());
    return launch_in(env).local_world_size;
  };
  for (const auto& [node, tasks] : std::map<std::string, int>{{"0", 2}, {"2", 2}, {"3", 1}}) {
    EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", node}}), tasks) << "node " << node;
  }
  EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "3,4"}, {"SLURM_NODEID", "1"}}), 4);
  EXPECT_EQ(local_world({{"SLURM_TASKS_PER_NODE", "3,4"}, {"SLURM_NODEID", "1"}}), 4);
  EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "1(x4)"}, {"SLURM_TASKS_PER_NODE", "4"}, {"SLURM_NODEID", "2"}}), 1);
  // What --ntasks-per-node asked for is not what Slurm placed: the list is believed.
  EXPECT_EQ(local_world({{"SLURM_TASKS_PER_NODE", "1(x4)"}, {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_NODEID", "0"}}), 1);
  for (const char* malformed : {"2(x3", "2,", ",2", "2,,1", "", "2,junk", "x2"}) {
    expect_error([&] { local_world({{"SLURM_TASKS_PER_NODE", malformed}}); },
                 "launch: expected a list like \"2(x3),1\" in $SLURM_TASKS_PER_NODE, got \"" + std::string(malformed) + "\"");
  }
  for (const char* implausible : {"0(x2)", "2(x0)", "99999999999", "1(x99999999999)"}) {
    expect_error([&] { local_world({{"SLURM_TASKS_PER_NODE", implausible}}); },
                 "launch: expected counts from 1 to 999999999 in $SLURM_TASKS_PER_NODE");
  }
  expect_error([&] { local_world({{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "4"}}); },
               "launch: $SLURM_NODEID is 4 but $SLURM_TASKS_PER_NODE (\"2(x3),1\") lists only 4 node(s)");
}

// A list of many runs (found by fuzzing: a regex that recursed per character overflowed the
// stack at a few thousand) is read like any other, and so is a malformed one of that length.
TEST(DetectLaunch, SlurmListsOfAnyLengthAreRead) {
  std::string runs = "1";
  for (int i = 1; i < 200000; ++i) runs += ",1";
  std::map<std::string, std::string> env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"},
                                         {"SLURM_TASKS_PER_NODE", runs + ",3"}, {"SLURM_NODEID", "200000"}};
  EXPECT_EQ(launch_in(env).local_world_size, 3);
  env["SLURM_TASKS_PER_NODE"] = runs + ",";
  EXPECT_THROW(launch_in(env), Error);
}

TEST(DetectLaunch, MissingLocalValuesAreTheGlobalOnes) {
  // No per-node count (srun always sets its list; an environment made by hand may not): until
  // MPI tells, assume one node.
  expect_launch(launch_in({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}), "slurm", 5, 8, 1, 8);
  expect_launch(launch_in({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}), "mpich", 2, 3, 2, 3);
}

TEST(DetectLaunch, MpiLaunchersComeFirstThenTorchrunThenSlurm) {
  // mpirun inside a Slurm allocation: Open MPI's variables describe this process.
  expect_launch(launch_in({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"},
                           {"SLURM_NTASKS", "1"}}),
                "openmpi", 1, 2, 1, 2);
  // torchrun inside a Slurm allocation inherits SLURM_PROCID=0 of the one batch task.
  expect_launch(launch_in({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}),
                "torchrun", 3, 4, 3, 4);
}

TEST(DetectLaunch, MalformedValuesAreNamed) {
  expect_error([] { launch_in({{"RANK", "one"}, {"WORLD_SIZE", "2"}}); },
               "expected a non-negative integer in $RANK, got \"one\"");
  expect_error([] { launch_in({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}); }, "$RANK");
  expect_error([] { launch_in({{"RANK", "2x"}, {"WORLD_SIZE", "2"}}); }, "$RANK");
  expect_error([] { launch_in({{"RANK", "2"}, {"WORLD_SIZE", "2"}}); },
               "torchrun says rank 2 of 2, which is not a rank of that world");
}

// Expects `choose` to pick "nccl" in a build with NCCL, and in one without to say it has none.
void expect_nccl_if_built(const std::function<std::string()>& choose) {
  if (built_with_nccl()) {
    EXPECT_EQ(choose(), "nccl");
  } else {
    expect_error(choose, ErrorKind::NcclNotBuilt, "this build has no NCCL backend (it needs CUDA, NCCL and MPI when "
                                                  "CMake runs); choose the MPI backend");
  }
}

TEST(ChooseBackend, MpiWhenAskedOrOnTheCpu) {
  LaunchInfo two_ranks;
  two_ranks.world_size = two_ranks.local_world_size = 2;
  EXPECT_EQ(choose_backend("mpi", Device::cuda(0), two_ranks, 2, false), "mpi");
  EXPECT_EQ(choose_backend("auto", Device::cpu(), two_ranks, 2, false), "mpi");
  // Two ranks, one GPU: NCCL refuses to share it, so "auto" stays with MPI.
  EXPECT_EQ(choose_backend("auto", Device::cuda(0), two_ranks, 1, false), "mpi");
  // A GPU for each rank: NCCL, if this build has it.
  EXPECT_EQ(choose_backend("auto", Device::cuda(0), two_ranks, 2, false), built_with_nccl() ? "nccl" : "mpi");
  expect_error([&] { choose_backend("gloo", Device::cpu(), two_ranks, 0, false); }, ErrorKind::Other,
               "choose_backend: expected \"auto\", \"mpi\" or \"nccl\", got \"gloo\"");
}

TEST(ChooseBackend, NcclWhereItCannotWorkSaysWhy) {
  LaunchInfo two_ranks;
  two_ranks.world_size = two_ranks.local_world_size = 2;
  expect_error([&] { choose_backend("nccl", Device::cpu(), two_ranks, 2, false); }, ErrorKind::NcclNeedsCuda,
               "NCCL backend moves CUDA tensors only, and the model is on cpu; put the model on a GPU, or choose the MPI "
               "backend");
  expect_error([&] { choose_backend("nccl", Device::cuda(0), two_ranks, 1, false); }, ErrorKind::NcclNeedsOneGpuPerRank,
               "2 ranks on this node but only 1 CUDA device(s); NCCL needs one GPU per rank: choose the MPI backend, or "
               "start fewer ranks");
  expect_nccl_if_built([&] { return choose_backend("nccl", Device::cuda(0), two_ranks, 2, false); });
}

// CUDA_VISIBLE_DEVICES set, one GPU seen by each of two ranks: perhaps the same GPU, perhaps
// one each (Slurm's --gpus-per-task=1). "auto" plays safe with MPI; "nccl", asked for, is let
// through, and NCCL itself refuses a shared GPU when it starts.
TEST(ChooseBackend, OneVisibleGpuPerRankIsLeftForNcclToCheck) {
  LaunchInfo two_ranks;
  two_ranks.world_size = two_ranks.local_world_size = 2;
  EXPECT_EQ(choose_backend("auto", Device::cuda(0), two_ranks, 1, true), "mpi");
  expect_nccl_if_built([&] { return choose_backend("nccl", Device::cuda(0), two_ranks, 1, true); });
}

}  // namespace
}  // namespace lockstep
