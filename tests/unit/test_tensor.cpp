// Tensors: factories, views and strides, dtype conversions, element access, printing, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

TEST(Tensor, FactoriesHaveShapeDtypeAndValues) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(sum(ones({4, 5})).item(), 20.0);
  EXPECT_EQ(full({2}, 7.5, TensorOptions().dtype(DType::f64)).to_vector<double>(), (std::vector<double>{7.5, 7.5}));
  EXPECT_EQ(arange(0, 5).to_vector<int>(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25).numel(), 4);
  EXPECT_EQ(from_vector(std::vector<int64_t>{3, 1}, {2}).dtype(), DType::i64);
}

TEST(Tensor, SeededRandomIsReproducibleAndInRange) {
  Generator g1(42), g2(42), g3(7);
  const auto a = rand({1000}, {}, &g1).to_vector<float>();
  const auto b = rand({1000}, {}, &g2).to_vector<float>();
  const auto c = rand({1000}, {}, &g3).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (float v : a) EXPECT_TRUE(v >= 0.0f && v < 1.0f);
  // randn: mean near 0 and variance near 1 on 20000 draws (5 standard errors).
  Tensor n = randn({20000}, TensorOptions().dtype(DType::f64), &g1);
  const double m = mean(n).item();
  EXPECT_NEAR(m, 0.0, 5.0 / std::sqrt(20000.0));
  EXPECT_NEAR(mean((n - m) * (n - m)).item(), 1.0, 0.05);
}

TEST(Tensor, TransposeIsAViewWithSwappedStrides) {
  Tensor x = arange(0, 6).reshape({2, 3});
  Tensor xt = x.t();
  EXPECT_EQ(xt.shape(), (Shape{3, 2}));
  EXPECT_EQ(xt.strides(), (Shape{1, 3}));
  EXPECT_FALSE(xt.is_contiguous());
  EXPECT_EQ(xt.storage(), x.storage());
  EXPECT_EQ(xt[2][1].item(), 5.0);
  EXPECT_EQ(xt.contiguous().to_vector<int>(), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_NE(xt.contiguous().storage(), x.storage());
  // Writing through the view writes the original.
  xt.select(0, 0).fill_(9.0);
  EXPECT_EQ(x.to_vector<int>(), (std::vector<int>{9, 1, 2, 9, 4, 5}));
}

TEST(Tensor, SliceSelectAndPermute) {
  Tensor x = arange(0, 24).reshape({2, 3, 4});
  Tensor s = x.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.strides(), (Shape{12, 4, 2}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(s.contiguous().to_vector<int>()[0], 1);
  EXPECT_EQ(s.contiguous().to_vector<int>()[1], 3);
  EXPECT_EQ(x.slice(0, -1, 100).shape(), (Shape{1, 3, 4}));  // Python-style clamping
  EXPECT_EQ(x.select(1, -1).shape(), (Shape{2, 4}));
  EXPECT_EQ(x.select(1, -1)[1][3].item(), 23.0);
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p[3][1][2].item(), x[1][2][3].item());
}

TEST(Tensor, ViewNeedsCompatibleStridesReshapeCopies) {
  Tensor x = arange(0, 12).reshape({3, 4});
  EXPECT_EQ(x.view({2, -1}).shape(), (Shape{2, 6}));
  EXPECT_EQ(x.view({2, 6}).storage(), x.storage());
  EXPECT_EQ(x.flatten().shape(), (Shape{12}));
  EXPECT_EQ(x.unsqueeze(1).shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), (Shape{3, 4}));
  EXPECT_EQ(x.squeeze(0).shape(), (Shape{3, 4}));  // not of size 1: unchanged, as in PyTorch
  // A transpose cannot be flattened without a copy.
  expect_error([&] { x.t().view({12}); }, "use reshape()");
  Tensor r = x.t().reshape({12});
  EXPECT_NE(r.storage(), x.storage());
  EXPECT_EQ(r.to_vector<int>()[1], 4);
  // Splitting a dimension of a transposed view is still a view.
  EXPECT_EQ(x.t().view({2, 2, 3}).storage(), x.storage());
  expect_error([&] { x.view({5, -1}); }, "invalid for input of size 12");
  expect_error([&] { x.view({-1, -1}); }, "only one dimension can be -1");
}

TEST(Tensor, ExpandUsesStrideZero) {
  Tensor row = from_vector({1, 2, 3}, {1, 3});
  Tensor e = row.expand({4, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(sum(e).item(), 24.0);
  expect_error([&] { row.expand({4, 2}); }, "cannot broadcast shape [1, 3] to [4, 2]");
  EXPECT_EQ(row.expand({2, 4, -1}).shape(), (Shape{2, 4, 3}));  // -1 keeps the size
  expect_error([&] { row.expand({-1, 1, 3}); }, "-1 is not allowed for the new leading dimension 0");
}

TEST(Tensor, ItemAndElementAccess) {
  Tensor x = from_vector({1.5, -2.0, 3.25, 4.0}, {2, 2});
  EXPECT_EQ(x[1][0].item(), 3.25);
  EXPECT_EQ(x[0][1].item<int>(), -2);
  expect_error([&] { x.item(); }, "only a one-element tensor");
  expect_error([&] { x[2]; }, "index 2 is out of range for dimension 0 of size 2");
  expect_error([&] { x.data_ptr<double>(); }, "holds f32 but f64 was asked for");
}

TEST(Half, RoundsToNearestEven) {
  // Exact values survive.
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.5f, 6.103515625e-05f /*smallest normal*/}) {
    EXPECT_EQ(static_cast<float>(Half(v)), v);
  }
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(static_cast<float>(Half(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  // 1 + 3 * 2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up to even.
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(Half(0.1f).bits, 0x2E66);  // 0.0999755859375, as numpy.float16(0.1)
  // Beyond 65504 (+ half an ulp) is infinity; subnormals keep their value.
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(70000.0f))));
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(BFloat16(0.1f).bits, 0x3DCD);  // torch.tensor(0.1).bfloat16() -> 0.10009765625
  EXPECT_EQ(static_cast<float>(BFloat16(0.1f)), 0.10009765625f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(70000.0f)), 70144.0f);  // bf16 keeps f32's range
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Tensor, DtypeConversions) {
  Tensor x = from_vector({0.1, 2.7, -3.5, 70000.0}, {4}, TensorOptions().dtype(DType::f64));
  EXPECT_EQ(x.to(DType::f32).dtype(), DType::f32);
  EXPECT_EQ(x.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, -3, 70000}));  // truncation, as C++ and PyTorch
  const auto h = x.to(DType::f16).to(DType::f64).to_vector<double>();
  EXPECT_EQ(h[0], static_cast<double>(static_cast<float>(Half(0.1f))));
  EXPECT_TRUE(std::isinf(h[3]));
  EXPECT_EQ(x.to(DType::bf16).to(DType::f32).to_vector<float>()[3], 70144.0f);
  EXPECT_EQ(from_vector({0, 2, 0}, {3}).to(DType::boolean).to_vector<int>(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(x.to(DType::f64).storage(), x.storage());  // same dtype: no copy
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(from_vector({1, 2, 3, 4}, {2, 2}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(from_vector({1.5, -2.25}, {2}).str(), "tensor([ 1.5000, -2.2500])");
  EXPECT_EQ(full({}, 3.0).str(), "tensor(3.)");
  EXPECT_EQ(from_vector({1, 2}, {2}, TensorOptions().dtype(DType::f64)).str(), "tensor([1., 2.], dtype=float64)");
  EXPECT_EQ(from_vector(std::vector<int64_t>{3, -1}, {2}).str(), "tensor([ 3, -1])");
  EXPECT_EQ(ones({2}).requires_grad_().str(), "tensor([1., 1.], requires_grad=True)");
  EXPECT_EQ(lt(from_vector({1, 5}, {2}), from_vector({2, 2}, {2})).str(), "tensor([ True, False])");
  EXPECT_EQ(arange(0, 2000).str().find("...") != std::string::npos, true);
  Tensor w = ones({2}).requires_grad_();
  EXPECT_EQ((w * 2.0).str(), "tensor([2., 2.], grad_fn=<MulBackward>)");
}

TEST(Tensor, ErrorsAreSentences) {
  expect_error([] { Device::parse("gpu"); }, "unknown device 'gpu': expected cpu, cuda or cuda:N");
  // One past the last GPU (cuda:0 on a machine without one).
  const int absent = cuda_device_count();
  expect_error([&] { zeros({2}, TensorOptions().device(Device::cuda(absent))); },
               "cannot use cuda:" + std::to_string(absent));
  expect_error([] { zeros({-1}); }, "negative size");
  // 2^32 * 2^32 elements: the product wraps around int64 to 0, which must not pass for empty.
  expect_error([] { zeros({int64_t{1} << 32, int64_t{1} << 32}); }, "times 4 bytes reach 2^63");
  expect_error([] { zeros({0, int64_t{1} << 62, 4}); }, "(zeros aside) times 4 bytes reach 2^63");
  expect_error([] { Tensor().shape(); }, "tensor is undefined");
  expect_error([] { from_vector({1, 2, 3}, {2, 2}); }, "3 values cannot fill shape [2, 2]");
  expect_error([] { ones({2}).requires_grad_().fill_(0); }, "cannot be modified in place");
  expect_error([] { from_vector(std::vector<int64_t>{1}, {1}).requires_grad_(); }, "only floating-point tensors can require grad");
}

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3").index(), 3);
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  // A build without CUDA sees no devices; with CUDA but no GPU (as on CI machines) the failing
  // driver query also means 0 devices, and asking for one is a sentence, not a crash.
  if (!built_with_cuda()) {
    EXPECT_EQ(cuda_device_count(), 0);
  }
  if (cuda_device_count() == 0) expect_error([] { empty({1}, TensorOptions().device(Device::cuda(0))); }, "cannot use cuda:0");
}

TEST(Tensor, SetDataKeepsIdentityAndAutograd) {
  Tensor w = ones({2}).requires_grad_();
  Tensor alias = w;  // another handle to the same tensor, as an optimiser holds
  sum(w * 2.0).backward();
  ASSERT_TRUE(w.grad().defined());
  w.set_data(from_vector({5, 6, 7}, {3}, TensorOptions().dtype(DType::f64)));
  EXPECT_EQ(alias.shape(), (Shape{3}));
  EXPECT_EQ(alias.dtype(), DType::f64);
  EXPECT_EQ(alias.to_vector<double>(), (std::vector<double>{5, 6, 7}));
  EXPECT_TRUE(alias.requires_grad());
  EXPECT_FALSE(alias.grad().defined());
}

// FSDP's way of freeing a parameter between uses: the storage gives its memory back while the
// tensors that view it live on; reading one is then an error, and a resize back gives every view
// the new bytes.
TEST(Tensor, StorageResizedToNothingAndBack) {
  const Tensor t = from_vector({1, 2, 3, 4}, {4});
  const Tensor view = t.slice(0, 2, 4);
  const Tensor saved = t.detach();  // what autograd keeps of a tensor it saves
  const int64_t version = t.version();
  t.storage()->resize(0);
  EXPECT_EQ(t.storage()->nbytes(), 0u);
  EXPECT_EQ(view.shape(), (Shape{2}));
  test::expect_error([&] { (void)view.to_vector<float>(); }, "the memory of this [2] tensor has been freed");
  t.storage()->resize(4 * sizeof(float));
  t.copy_(from_vector({5, 6, 7, 8}, {4}));
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{7, 8}));
  EXPECT_EQ(saved.to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  // The copy counted as a change; a refill with the saved values may put the count back.
  EXPECT_EQ(saved.version(), version + 1);
  t.storage()->restore_version(version);
  EXPECT_EQ(saved.version(), version);
}

TEST(Tensor, ZeroDimensionalTensorsHaveNoDimensionsToIndex) {
  const Tensor s = full({}, 3.0);
  expect_error([&] { s.size(0); }, "a 0-d tensor has no dimensions");
  expect_error([&] { s[0]; }, "select: a 0-d tensor has no dimensions to index");
  expect_error([&] { s.slice(0, 0, 1); }, "slice: a 0-d tensor has no dimensions to slice");
  // As in PyTorch, reductions and transpose accept dimension 0 or -1 of a 0-d tensor.
  EXPECT_EQ(sum(s, {0}).item(), 3.0);
  EXPECT_EQ(sum(s, {0, -1}).item(), 3.0);
  EXPECT_EQ(s.transpose(0, -1).item(), 3.0);
}

TEST(Tensor, WritesThroughExpandedViewsAreRefused) {
  // Every element of the expanded view is the same memory: adding 40000 ones to it would race.
  const Tensor e = zeros({1}).expand({40000});
  expect_error([&] { e.add_(ones({40000})); }, "add_: the tensor written to is expanded (stride 0 in dimension 0)");
  expect_error([&] { e.copy_(ones({40000})); }, "copy_: the tensor written to is expanded");
  const Tensor column = zeros({3, 1});
  column.expand({3, 1}).fill_(2.0);  // size-1 dimensions may have any stride
  EXPECT_EQ(sum(column).item(), 6.0);
}

TEST(Tensor, IntegerAndBoolSumsAreExactI64) {
  // 300 u8 ones would wrap to 44 in u8; PyTorch (and Lockstep) sum integers as i64.
  const Tensor u8 = ones({300}, TensorOptions().dtype(DType::u8));
  EXPECT_EQ(sum(u8).dtype(), DType::i64);
  EXPECT_EQ(sum(u8).item<int64_t>(), 300);
  // Counting true values: how accuracy is computed.
  EXPECT_EQ(sum(eq(from_vector(std::vector<int64_t>{1, 2, 3}, {3}), from_vector(std::vector<int64_t>{1, 0, 3}, {3}))).item<int64_t>(), 2);
  // Large i64 values stay exact (2^53 + 1 is not a double).
  const int64_t big = (int64_t(1) << 53) + 1;
  EXPECT_EQ(sum(from_vector(std::vector<int64_t>{big, 1}, {2})).item<int64_t>(), big + 1);
}
