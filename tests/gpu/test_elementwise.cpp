// Elementwise ops on the GPU against the CPU, forward and backward: every binary op (the
// activations' backward ops through sigmoid/tanh's gradients), relu's mask, every unary op, every
// comparison, broadcasting and 0-d operands, transposed, strided and misaligned views (which
// leave the float4 path), sizes 0 and 1, lengths the float4 path leaves a tail of, and a
// tensor of over a million elements.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "../unit/test_util.h"
#include "gpu_test_util.h"
#include "lockstep.h"
#include "tensor/ops/rules/relu_mask.h"
#include "tensor/ops/dispatch/relu_kernels.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// Tolerances. f32: +, -, *, / are correctly rounded on both sides, but exp, log and tanh come
// from different math libraries (a few ulp apart) and the GPU fuses a * b + c into one
// rounding; f64: the same at double precision.
double rtol(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }
double atol(DType dtype) { return dtype == DType::f32 ? 1e-6 : 1e-14; }

const DType kFloating[] = {DType::f32, DType::f64};

using Binary = Tensor (*)(const Tensor&, const Tensor&);
struct BinaryCase {
  const char* name;
  Binary fn;
};
const BinaryCase kArithmetic[] = {{"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}};
const BinaryCase kComparisons[] = {{"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}};

using Unary = Tensor (*)(const Tensor&);
struct UnaryCase {
  const char* name;
  Unary fn;
};
const UnaryCase kUnary[] = {{"neg", neg}, {"exp", exp}, {"log", log}, {"relu", relu}, {"sigmoid", sigmoid}, {"tanh", tanh}};

// A leaf that requires grad: random in [lo, lo + 2) (away from 0 for div's divisor and log).
Tensor leaf(const Shape& shape, uint64_t seed, DType dtype, double lo = -1.0) {
  return (random_cpu(shape, seed, dtype) + (lo + 1.0)).detach().requires_grad_(true);
}

// op(a, b) and the gradients of both, on a, b made by `make` from CPU leaves.
void check_binary(const BinaryCase& op, const Tensor& a, const Tensor& b, const std::string& what,
                  const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& make =
                      [](const std::vector<Tensor>& in) { return in; }) {
  const DType dtype = a.dtype();
  expect_parity(
      [&](const std::vector<Tensor>& in) {
        const std::vector<Tensor> x = make(in);
        return op.fn(x[0], x[1]);
      },
      {a, b}, rtol(dtype), atol(dtype), std::string(op.name) + " " + what + " " + dtype_name(dtype));
}

}  // namespace

TEST(GpuElementwise, ArithmeticSameShape) {
  // 1001 = 4 * 250 + 1: the float4 path plus a one-element tail.
  for (DType dtype : kFloating) {
    for (const BinaryCase& op : kArithmetic) {
      for (const Shape& shape : {Shape{3, 1001}, Shape{7}, Shape{1}}) {
        check_binary(op, leaf(shape, 1, dtype), leaf(shape, 2, dtype, 1.0), shape_str(shape));
      }
    }
  }
}

TEST(GpuElementwise, ArithmeticBroadcasting) {
  // (4, 1, 5) with (3, 1) -> (4, 3, 5); a row against a matrix; a 0-d operand on either side.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 1, 5}, {3, 1}}, {{6, 9}, {9}}, {{6, 9}, {6, 1}}, {{2, 3}, {}}, {{}, {2, 3}}, {{}, {}}};
  for (DType dtype : kFloating) {
    for (const BinaryCase& op : kArithmetic) {
      for (const auto& [sa, sb] : shapes) {
        check_binary(op, leaf(sa, 3, dtype), leaf(sb, 4, dtype, 1.0), shape_str(sa) + " with " + shape_str(sb));
      }
    }
  }
}

TEST(GpuElementwise, ScalarOperators) {
  for (DType dtype : kFloating) {
    const Tensor x = leaf({5, 3}, 5, dtype, 1.0);
    expect_parity([](const std::vector<Tensor>& in) { return 2.0 / in[0] - in[0] * 3.0 + 1.5; }, {x}, rtol(dtype),
                  atol(dtype), std::string("scalar operators ") + dtype_name(dtype));
  }
}

TEST(GpuElementwise, NonContiguousOperands) {
  for (DType dtype : kFloating) {
    for (const BinaryCase& op : kArithmetic) {
      // A transposed view with a contiguous operand.
      check_binary(op, leaf({9, 6}, 6, dtype), leaf({6, 9}, 7, dtype, 1.0), "transposed",
                   [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].t(), in[1]}; });
      // Every other column of both.
      check_binary(op, leaf({5, 20}, 8, dtype), leaf({5, 20}, 9, dtype, 1.0), "strided slices",
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{in[0].slice(1, 0, 20, 2), in[1].slice(1, 1, 20, 2)};
                   });
      // Contiguous but starting one element in: not on a 16-byte boundary, so not float4.
      check_binary(op, leaf({1030}, 10, dtype), leaf({1030}, 11, dtype, 1.0), "misaligned views",
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{in[0].slice(0, 1, 1029), in[1].slice(0, 2, 1030)};
                   });
    }
  }
}

TEST(GpuElementwise, EveryUnaryOpAndItsBackward) {
  // relu's gradient runs the relu_backward kernel on relu's mask, sigmoid and tanh's the
  // SigmoidBackward and TanhBackward binary kernels. log gets positive inputs.
  for (DType dtype : kFloating) {
    for (const UnaryCase& op : kUnary) {
      const double lo = std::string(op.name) == "log" ? 0.5 : -1.0;
      for (const Shape& shape : {Shape{4, 257}, Shape{1}, Shape{}}) {
        expect_parity([&](const std::vector<Tensor>& in) { return op.fn(in[0]); }, {leaf(shape, 12, dtype, lo)},
                      rtol(dtype), atol(dtype), std::string(op.name) + " " + shape_str(shape) + " " + dtype_name(dtype));
      }
      expect_parity([&](const std::vector<Tensor>& in) { return op.fn(in[0].t().slice(0, 1, 7, 2)); },
                    {leaf({9, 7}, 13, dtype, lo)}, rtol(dtype), atol(dtype),
                    std::string(op.name) + " of a transposed slice " + dtype_name(dtype));
    }
  }
}

// relu's mask (tensor/ops/rules/relu_mask.h): the CUDA kernel gathers a warp's 32 bits with
// a ballot, the CPU builds them a byte at a time; the masks must be the same bytes, padding
// included, and the outputs the same values. Lengths end inside a byte, a word, a warp and a
// block, and one spans more blocks than a grid holds at once; a third of the values are 0.
TEST(GpuElementwise, ReluMaskIsTheCpuMask) {
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const int64_t n : {int64_t{1}, int64_t{13}, int64_t{33}, int64_t{257}, int64_t{65536} * 256 + 45}) {
      const std::string what = "relu of " + std::to_string(n) + " " + dtype_name(dtype) + " values";
      const Tensor r = random_cpu({n}, 17, DType::f64);
      const Tensor x = (r * gt(r * r, scalar_like(1.0 / 9.0, r)).to(DType::f64)).to(dtype);  // 0 where |r| <= 1/3
      const auto run = [&](Device device) {
        const Tensor on = x.to(device);
        const Tensor out = empty({n}, TensorOptions().dtype(dtype).device(device));
        const Tensor mask = empty({relu_mask_bytes(n)}, TensorOptions().dtype(DType::u8).device(device));
        kernels::relu.call(device, on, out, mask);
        return std::make_pair(out.to(Device::cpu()), mask.to(Device::cpu()));
      };
      const auto [cpu_out, cpu_mask] = run(Device::cpu());
      const auto [gpu_out, gpu_mask] = run(gpu());
      EXPECT_EQ(cpu_mask.to_vector<int>(), gpu_mask.to_vector<int>()) << what << ": the masks differ";
      expect_close(cpu_out, gpu_out, 0, 0, what);
    }
  }
}

TEST(GpuElementwise, EveryComparison) {
  // Values on a coarse grid so that many pairs are equal; floating and integer dtypes, with
  // broadcasting and a transposed operand. Results are bool and must match exactly.
  for (DType dtype : {DType::f32, DType::f64, DType::i64, DType::i32}) {
    const Tensor a = (random_cpu({6, 8}, 14, DType::f64) * 3.0).to(DType::i64).to(dtype);
    const Tensor b = (random_cpu({8, 6}, 15, DType::f64) * 3.0).to(DType::i64).to(dtype);
    const Tensor row = (random_cpu({8}, 16, DType::f64) * 3.0).to(DType::i64).to(dtype);
    for (const BinaryCase& op : kComparisons) {
      const std::string what = std::string(op.name) + " " + dtype_name(dtype);
      const Tensor on_gpu = op.fn(a.to(gpu()), b.to(gpu()).t());
      EXPECT_EQ(on_gpu.dtype(), DType::boolean) << what;
      expect_close(op.fn(a, b.t()), on_gpu, 0, 0, what + " with a transposed operand");
      expect_close(op.fn(a, row), op.fn(a.to(gpu()), row.to(gpu())), 0, 0, what + " with a broadcast row");
      expect_close(op.fn(a, a), op.fn(a.to(gpu()), a.to(gpu())), 0, 0, what + " of equal tensors");
    }
  }
}

TEST(GpuElementwise, EmptyTensors) {
  for (const BinaryCase& op : kArithmetic) {
    const Tensor out = op.fn(zeros({0, 3}).to(gpu()), ones({3}).to(gpu()));
    EXPECT_EQ(out.shape(), (Shape{0, 3})) << op.name;
    EXPECT_TRUE(out.device() == gpu()) << op.name;
  }
  for (const UnaryCase& op : kUnary) EXPECT_EQ(op.fn(zeros({2, 0}).to(gpu())).shape(), (Shape{2, 0})) << op.name;
  EXPECT_EQ(lt(zeros({0}).to(gpu()), zeros({0}).to(gpu())).numel(), 0);
}

TEST(GpuElementwise, OverAMillionElements) {
  // 2^20 + 3 elements: many float4s per thread and a tail; forward only, the inputs are large.
  const Tensor a = random_cpu({(1 << 20) + 3}, 17), b = random_cpu({(1 << 20) + 3}, 18) + 2.0;
  for (const BinaryCase& op : kArithmetic) {
    expect_close(op.fn(a, b), op.fn(a.to(gpu()), b.to(gpu())), rtol(DType::f32), atol(DType::f32),
                 std::string(op.name) + " of 2^20 + 3 elements");
  }
  expect_close(gt(a, b - 2.0), gt(a.to(gpu()), b.to(gpu()) - 2.0), 0, 0, "gt of 2^20 + 3 elements");
  for (const UnaryCase& op : kUnary) {
    expect_close(op.fn(b), op.fn(b.to(gpu())), rtol(DType::f32), atol(DType::f32),
                 std::string(op.name) + " of 2^20 + 3 elements");
  }
}

TEST(GpuElementwise, UnsupportedDTypeGivesTheCpuError) {
  // Arithmetic on integers is refused with the same sentence on both devices.
  const Tensor h = ones({3}).to(DType::i32);
  const std::string on_cpu = error_message([&] { add(h, h); });
  EXPECT_NE(on_cpu, "no error");
  EXPECT_EQ(error_message([&] { add(h.to(gpu()), h.to(gpu())); }), on_cpu);
  EXPECT_EQ(error_message([&] { exp(h.to(gpu())); }), error_message([&] { exp(h); }));
}
