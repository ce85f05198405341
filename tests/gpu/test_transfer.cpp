// Moving tensors between the CPU and the GPU, and the copy/fill/axpy/scale kernels that
// Tensor's own methods use on the GPU.
#include <gtest/gtest.h>

#include "../common/busy_gpu.h"
#include "tensor/ops/dispatch/copy_kernels.h"
#include "gpu_test_util.h"
#include "../unit/test_util.h"

namespace lockstep::test {
namespace {

TEST(Transfer, RoundTripKeepsEveryDtypeExactly) {
  const Tensor source = random_cpu({3, 5, 7}, 1, DType::f64) * 100.0;
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    const Tensor host = source.to(dtype);
    const Tensor device = host.to(gpu());
    EXPECT_EQ(device.device(), gpu());
    EXPECT_EQ(device.dtype(), dtype);
    // Exact: a copy moves bits, it computes nothing.
    EXPECT_EQ(device.to(Device::cpu()).to_vector<double>(), host.to_vector<double>()) << dtype_name(dtype);
  }
}

TEST(Transfer, ToReturnsANewTensorAndLeavesTheOriginal) {
  const Tensor host = random_cpu({4, 4}, 2);
  const Tensor device = host.to(gpu());
  EXPECT_EQ(host.device(), Device::cpu());
  EXPECT_NE(host.storage(), device.storage());
  EXPECT_TRUE(host.to(Device::cpu()).is_same(host));  // already there: the same tensor
  EXPECT_TRUE(device.to(gpu()).is_same(device));
}

TEST(Transfer, StridedViewsArriveInRowMajorOrder) {
  const Tensor host = random_cpu({6, 8}, 3);
  const Tensor view = host.t().slice(0, 1, 7, 2);  // (3, 6), neither contiguous nor at offset 0
  expect_close(view.contiguous(), view.to(gpu()), 0, 0, "to(gpu) of a strided view");
  const Tensor device_view = host.to(gpu()).t().slice(0, 1, 7, 2);
  expect_close(view.contiguous(), device_view.to(Device::cpu()), 0, 0, "to(cpu) of a strided GPU view");
}

TEST(Transfer, PinnedMemoryRoundTripBlockingAndNonBlocking) {
  const Tensor host = random_cpu({1000, 37}, 4);
  const Tensor pinned = host.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_FALSE(host.is_pinned());
  EXPECT_TRUE(pinned.pin_memory().is_same(pinned));
  expect_close(host, pinned, 0, 0, "pin_memory copy");
  for (bool non_blocking : {false, true}) {
    const Tensor device = pinned.to(gpu(), non_blocking);
    // Later GPU work is queued after the copy, so it sees the data without any explicit wait.
    const Tensor doubled = device * 2.0;
    expect_close(host * 2.0, doubled, 0, 0, non_blocking ? "non-blocking H2D" : "blocking H2D");
    // Device to pinned host memory (the copy a non-blocking to(cpu) makes): the values are
    // there once the stream is done.
    const Tensor back = empty(host.shape(), TensorOptions().pinned_memory(true));
    cuda::copy_between_devices(device, back, non_blocking);
    cuda::synchronize(gpu());
    expect_close(host, back, 0, 0, "D2H into pinned memory");
  }
}

// A pinned tensor sent twice while the GPU is busy: the second send asks whether the first
// copy has finished reading the block (it has not: it waits behind the products), and CUDA
// answers "not ready" through the thread's last-error slot too. That answer is no failure,
// and must not be reported at the next kernel launch as if the kernel had failed.
TEST(Transfer, APinnedCopyStillQueuedLeavesNoErrorBehind) {
  queue_busy_work(gpu());
  const Tensor host = random_cpu({1000}, 7);
  const Tensor pinned = host.pin_memory();
  const Tensor first = pinned.to(gpu(), true);
  const Tensor second = pinned.to(gpu(), true);
  Tensor both;
  ASSERT_NO_THROW(both = first + second);
  expect_close(host * 2.0, both, 0, 0, "two non-blocking copies of one pinned tensor");
}

TEST(Transfer, GradientsFlowBackAcrossDevices) {
  const Tensor x = random_cpu({5}, 5).requires_grad_(true);
  const Tensor y = x.to(gpu()) * 3.0;
  sum(y).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(5, 3.0f));
}

TEST(Transfer, CopyBetweenGpusWhenThereAreTwo) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const Tensor host = random_cpu({300}, 6);
  const Tensor second = host.to(gpu()).to(Device::cuda(1));
  EXPECT_EQ(second.device(), Device::cuda(1));
  expect_close(host, second, 0, 0, "cuda:0 -> cuda:1");
}

TEST(Transfer, ItemAndPrintingReadFromTheGpu) {
  EXPECT_EQ(full({}, 2.5).to(gpu()).item(), 2.5);
  EXPECT_EQ(from_vector({1, 2}, {2}).to(gpu()).str(), "tensor([1., 2.], device='cuda:0')");
}

TEST(Transfer, MixingDevicesIsAClearError) {
  const Tensor a = ones({2});
  const Tensor b = ones({2}).to(gpu());
  expect_error([&] { add(a, b); }, "add: expected all tensors on the same device, got cpu and cuda:0");
  expect_error([&] { matmul(a.view({1, 2}), b.view({2, 1})); }, "matmul: expected all tensors on the same device");
  expect_error([&] { a.to_vector<float>(); b.to_vector<float>(); }, "to_vector: the tensor is on cuda:0");
  expect_error([&] { b.pin_memory(); }, "pin_memory: only CPU tensors can be pinned");
}

// ---- the kernels behind Tensor's own methods on the GPU -----------------------------------

TEST(CopyKernels, ConvertEveryDtypePairLikeTheCpu) {
  const Tensor source = random_cpu({4, 9}, 7, DType::f64) * 300.0;
  const std::vector<DType> dtypes{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8,
                                  DType::boolean};
  for (DType from : dtypes) {
    // u8 cannot hold negatives: give it non-negative values.
    const Tensor input = (from == DType::u8 ? full(source.shape(), 7.0) : source).to(from);
    for (DType to : dtypes) {
      if (to == DType::u8 && from != DType::u8 && from != DType::boolean) continue;  // negatives: undefined in C++
      expect_close(input.to(to), input.to(gpu()).to(to), 0, 0,
                   std::string("to(") + dtype_name(to) + ") from " + dtype_name(from));
    }
  }
}

TEST(CopyKernels, CopyIntoAViewWithBroadcasting) {
  const Tensor row = random_cpu({5}, 8);
  Tensor host = zeros({4, 10});
  Tensor device = zeros({4, 10}).to(gpu());
  host.slice(1, 0, 10, 2).copy_(row);
  device.slice(1, 0, 10, 2).copy_(row.to(gpu()));
  expect_close(host, device, 0, 0, "copy_ of a broadcast row into every other column");
  // copy_ from another device moves the data first.
  device.copy_(host * 2.0);
  expect_close(host * 2.0, device, 0, 0, "copy_ from the CPU into a GPU tensor");
}

TEST(CopyKernels, FillAxpyScaleMatchTheCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor a = random_cpu({7, 33}, 9, dtype);
    const Tensor b = random_cpu({33}, 10, dtype);
    Tensor host = a.clone();
    Tensor device = a.to(gpu());
    host.add_(b, -0.75).mul_(1.5);
    device.add_(b.to(gpu()), -0.75).mul_(1.5);
    // The same two roundings in the same order on both devices (no fused multiply-add is
    // allowed to change them by more than one rounding): 1e-6 relative in f32.
    expect_close(host, device, dtype == DType::f32 ? 1e-6 : 1e-14, 0, "add_ then mul_");
    host.t().fill_(0.25);
    device.t().fill_(0.25);
    expect_close(host, device, 0, 0, "fill_ through a transposed view");
  }
  expect_close(full({3}, 65504.0, TensorOptions().dtype(DType::f16)), full({3}, 65504.0, TensorOptions().dtype(DType::f16).device(gpu())), 0, 0,
               "fill_ of f16");
}

TEST(CopyKernels, EmptyTensorsAreNoOps) {
  const Tensor device = empty({0, 3}, TensorOptions().device(gpu()));
  device.fill_(1.0);
  device.copy_(zeros({0, 3}));
  EXPECT_EQ(device.to(Device::cpu()).numel(), 0);
}

}  // namespace
}  // namespace lockstep::test
