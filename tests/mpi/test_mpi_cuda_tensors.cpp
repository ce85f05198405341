// The MPI backend with tensors on a GPU, which it stages through pinned host memory: what the
// MPI backend does when ranks share a GPU (NCCL refuses them). Each collective must give on GPU
// tensors exactly what it gives on the same values on the CPU. Skips unless this machine has a
// GPU (make gpu-check's step mpi_tests runs it with two ranks on one GPU).
#include <gtest/gtest.h>

#include <vector>

#include "mpi_test_util.h"

namespace lockstep {
namespace {

using test::group;

// Rank r's tensor: (r + 1) * 1000 + i at element i, exact in f32 and i64.
Tensor rank_values(int rank, int64_t n, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (rank + 1) * 1000.0 + static_cast<double>(i);
  return from_vector(v, {n}).to(dtype);
}

std::vector<double> on_cpu(const Tensor& t) { return t.to(Device::cpu()).to(DType::f64).to_vector<double>(); }

TEST(MpiCudaTensors, EveryCollectiveGivesTheCpuResult) {
  // Every rank agrees on skipping, so that none is left waiting in a collective.
  const Tensor no_gpu_somewhere = full({1}, cuda_device_count() > 0 ? 0 : 1, TensorOptions().dtype(DType::i32));
  group().all_reduce(no_gpu_somewhere, ReduceOp::Max);
  if (no_gpu_somewhere.item<int32_t>() == 1) GTEST_SKIP() << "needs a CUDA device on every rank's machine";
  const Device gpu = Device::cuda(mpi::node_rank_and_size().first % cuda_device_count());
  const int world = group().size(), rank = group().rank();
  for (DType dtype : {DType::f32, DType::i64}) {
    const int64_t n = 1001;
    const Tensor mine = rank_values(rank, n, dtype);
    // all_reduce: read and written in place.
    const Tensor summed_cpu = mine.clone(), summed_gpu = mine.to(gpu);
    group().all_reduce(summed_cpu);
    group().all_reduce(summed_gpu);
    EXPECT_EQ(on_cpu(summed_gpu), on_cpu(summed_cpu)) << "all_reduce, " << dtype_name(dtype);
    // broadcast: the root's values are read, everyone else's are written.
    const Tensor shared_cpu = mine.clone(), shared_gpu = mine.to(gpu);
    group().broadcast(shared_cpu, world - 1);
    group().broadcast(shared_gpu, world - 1);
    EXPECT_EQ(on_cpu(shared_gpu), on_cpu(shared_cpu)) << "broadcast, " << dtype_name(dtype);
    // all_gather and reduce_scatter: outputs that start as -1, so every element must be written.
    const TensorOptions on_gpu = TensorOptions().dtype(dtype).device(gpu);
    const Tensor gathered_cpu = full({world * n}, -1, TensorOptions().dtype(dtype));
    const Tensor gathered_gpu = full({world * n}, -1, on_gpu);
    group().all_gather(gathered_cpu, mine);
    group().all_gather(gathered_gpu, mine.to(gpu));
    EXPECT_EQ(on_cpu(gathered_gpu), on_cpu(gathered_cpu)) << "all_gather, " << dtype_name(dtype);
    const Tensor whole = rank_values(rank, world * n, dtype);
    const Tensor slice_cpu = full({n}, -1, TensorOptions().dtype(dtype)), slice_gpu = full({n}, -1, on_gpu);
    group().reduce_scatter(slice_cpu, whole);
    group().reduce_scatter(slice_gpu, whole.to(gpu));
    EXPECT_EQ(on_cpu(slice_gpu), on_cpu(slice_cpu)) << "reduce_scatter, " << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace lockstep
