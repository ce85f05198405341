// The NCCL backend, wherever it can run: NCCL allows one rank per GPU, so these tests skip
// unless the build has NCCL and this machine has a GPU for each of its ranks (on a one-GPU
// machine: `mpirun -n 1 tests/mpi_tests --gtest_filter='Nccl*'`, make gpu-check's step
// mpi_nccl_1). Results are checked exactly against values computed on the CPU.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/busy_gpu.h"
#include "distributed/process_group_mpi.h"
#include "distributed/process_group_nccl.h"
#include "mpi_test_util.h"
#include "util/trace.h"

namespace lockstep {
namespace {

using test::group;
using test::queue_busy_work;

// An NCCL group over the same ranks, each on the GPU of its rank on this machine, or null when
// one cannot run here. Every rank agrees on the answer, so that none is left in a collective.
std::shared_ptr<ProcessGroup> nccl_group() {
  const auto [node_rank, node_size] = mpi::node_rank_and_size();
  const bool possible = built_with_nccl() && cuda_device_count() >= node_size;
  const Tensor impossible_somewhere = full({1}, possible ? 0 : 1, TensorOptions().dtype(DType::i32));
  group().all_reduce(impossible_somewhere, ReduceOp::Max);
  if (impossible_somewhere.item<int32_t>() == 1) return nullptr;
  return make_nccl_process_group(make_mpi_process_group(), Device::cuda(node_rank));
}

#define NCCL_GROUP_OR_SKIP(name)                                                                        \
  const std::shared_ptr<ProcessGroup> name = nccl_group();                                              \
  if (!name) GTEST_SKIP() << "needs a build with NCCL and one GPU per rank on this machine (" \
                          << cuda_device_count() << " here)"

// Rank r's tensor: r + 1 + i / 8 at element i, exact in f32 and i64.
Tensor rank_values(int rank, int64_t n, DType dtype, Device device) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = rank + 1 + static_cast<double>(i / 8);
  return from_vector(v, {n}).to(dtype).to(device);
}

std::vector<double> on_cpu(const Tensor& t) { return t.to(Device::cpu()).to(DType::f64).to_vector<double>(); }


TEST(Nccl, CollectivesGiveExactResults) {
  NCCL_GROUP_OR_SKIP(nccl);
  const int world = nccl->size(), rank = nccl->rank();
  const Device gpu = Device::cuda(mpi::node_rank_and_size().first);
  EXPECT_EQ(nccl->backend_name(), "nccl");
  for (DType dtype : {DType::f32, DType::i64}) {
    const int64_t n = 1001;  // odd, and not a multiple of any vector width
    // all_reduce: the sum of every rank's values.
    const Tensor summed = rank_values(rank, n, dtype, gpu);
    nccl->all_reduce(summed, ReduceOp::Sum);
    std::vector<double> want(static_cast<size_t>(n), 0.0);
    for (int r = 0; r < world; ++r) {
      const std::vector<double> v = on_cpu(rank_values(r, n, dtype, Device::cpu()));
      for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
    }
    EXPECT_EQ(on_cpu(summed), want) << "all_reduce, " << dtype_name(dtype);
    // broadcast: the last rank's values everywhere.
    const Tensor shared = rank_values(rank, n, dtype, gpu);
    nccl->broadcast(shared, world - 1);
    EXPECT_EQ(on_cpu(shared), on_cpu(rank_values(world - 1, n, dtype, Device::cpu()))) << "broadcast";
    // all_gather: every rank's values, rank 0's first.
    const Tensor gathered = zeros({world * n}, TensorOptions().dtype(dtype).device(gpu));
    nccl->all_gather(gathered, rank_values(rank, n, dtype, gpu));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(on_cpu(gathered.slice(0, r * n, (r + 1) * n)), on_cpu(rank_values(r, n, dtype, Device::cpu())))
          << "all_gather, rank " << r << "'s part";
    }
    // reduce_scatter: rank r keeps the r-th slice of the sum.
    const Tensor slice = zeros({n}, TensorOptions().dtype(dtype).device(gpu));
    nccl->reduce_scatter(slice, rank_values(rank, world * n, dtype, gpu), ReduceOp::Sum);
    std::vector<double> want_slice(static_cast<size_t>(n), 0.0);
    for (int r = 0; r < world; ++r) {
      const std::vector<double> v = on_cpu(rank_values(r, world * n, dtype, Device::cpu()));
      for (int64_t i = 0; i < n; ++i) want_slice[static_cast<size_t>(i)] += v[static_cast<size_t>(rank * n + i)];
    }
    EXPECT_EQ(on_cpu(slice), want_slice) << "reduce_scatter, " << dtype_name(dtype);
  }
  nccl->barrier();
}

// The input's values come from the last kernel queued before the collective: NCCL's stream
// must wait for it (else NCCL sends what the memory held before). The output is read by a
// copy queued after wait(), which must in turn wait for NCCL. all_gather copies even on one
// rank, so this checks the order on a single GPU too.
TEST(Nccl, CollectivesRunAfterTheKernelsQueuedBeforeThem) {
  NCCL_GROUP_OR_SKIP(nccl);
  const int world = nccl->size(), rank = nccl->rank();
  const Device gpu = Device::cuda(mpi::node_rank_and_size().first);
  const int64_t n = 1 << 20;
  queue_busy_work(gpu);
  const Tensor input = full({n}, rank + 1, TensorOptions().device(gpu));
  const Tensor output = empty({world * n}, TensorOptions().device(gpu));
  nccl->all_gather(output, input);
  std::vector<double> want;
  for (int r = 0; r < world; ++r) want.insert(want.end(), static_cast<size_t>(n), r + 1.0);
  EXPECT_EQ(on_cpu(output), want);
}

// A collective whose Work is dropped without wait(): its tensors go back to the caching
// allocator at once, and the next tensor of the output's size gets the output's block while
// NCCL may still be about to write it. The stream that hands the block out again must wait for
// the collective first. (Without that wait this fails only when NCCL loses the race.)
TEST(Nccl, MemoryOfADroppedCollectiveIsReusedOnlyAfterIt) {
  NCCL_GROUP_OR_SKIP(nccl);
  const int world = nccl->size();
  const Device gpu = Device::cuda(mpi::node_rank_and_size().first);
  const int64_t n = 1 << 20;
  {
    queue_busy_work(gpu);
    // The input is a view of a larger block, so that only the output's block has the size
    // asked for next.
    const Tensor source = full({(world + 1) * n}, 3.0, TensorOptions().device(gpu));
    const Tensor output = empty({world * n}, TensorOptions().device(gpu));
    nccl->all_gather_async(output, source.slice(0, 0, n));
  }
  const Tensor fresh = empty({world * n}, TensorOptions().device(gpu));
  fresh.fill_(7.0);
  EXPECT_EQ(on_cpu(fresh), std::vector<double>(static_cast<size_t>(world * n), 7.0));
}

// A collective on a trace: a span on the calling thread when it was queued, named as the MPI
// backend names its spans, plus "queued".
TEST(Nccl, CollectivesShowWhenTheyWereQueued) {
  NCCL_GROUP_OR_SKIP(nccl);
  const Tensor t = ones({1024}, TensorOptions().device(Device::cuda(mpi::node_rank_and_size().first)));
  enable_trace();
  nccl->all_reduce(t);
  disable_trace();
  const nlohmann::json events = nlohmann::json::parse("[" + trace_events_json(0, "nccl", trace_start_us()) + "]");
  int spans = 0;
  for (const auto& event : events) {
    if (event["ph"] == "X" && event["name"] == "all_reduce 4 KiB queued" && event["cat"] == "comm") ++spans;
  }
  EXPECT_EQ(spans, 1);
}

}  // namespace
}  // namespace lockstep
