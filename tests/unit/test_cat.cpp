// cat and stack: values and shapes along every dimension, inputs of different sizes, strided
// inputs, gradients (each input gets its slice), errors naming the offending tensor.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "lockstep.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {
const TensorOptions f64 = TensorOptions().dtype(DType::f64);

// out[i, j, k] read from a contiguous 3-D vector.
double at(const std::vector<double>& v, const Shape& shape, int64_t i, int64_t j, int64_t k) {
  return v[(i * shape[1] + j) * shape[2] + k];
}
}  // namespace

TEST(Join, CatKnownValues) {
  Tensor a = from_vector({1, 2,
                          3, 4}, {2, 2});
  Tensor b = from_vector({5, 6}, {1, 2});
  Tensor c = from_vector({7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor rows = cat({a, b, c});
  EXPECT_EQ(rows.shape(), (Shape{6, 2}));
  EXPECT_EQ(rows.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));

  Tensor d = from_vector({5, 6, 7, 8, 9, 10}, {2, 3});
  Tensor cols = cat({a, d, a}, -1);
  EXPECT_EQ(cols.shape(), (Shape{2, 7}));
  EXPECT_EQ(cols.to_vector<double>(), (std::vector<double>{1, 2, 5, 6, 7, 1, 2,
                                                           3, 4, 8, 9, 10, 3, 4}));
  // Integer tensors and a single input work too.
  EXPECT_EQ(cat({from_vector(std::vector<int64_t>{1, 2}, {2}), from_vector(std::vector<int64_t>{3}, {1})}).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(cat({a}).to_vector<double>(), a.to_vector<double>());
}

TEST(Join, CatEveryDimensionOf3DMatchesNaiveLoop) {
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    // Three inputs of sizes 1, 2 and 3 along dim, 2 x 3 elsewhere.
    std::vector<Tensor> inputs;
    for (int64_t k = 0; k < 3; ++k) {
      Shape shape{2, 3, 3};
      shape[dim] = k + 1;
      inputs.push_back(random_input(shape, 10 + k, false));
    }
    inputs[1] = inputs[1].transpose(0, 2).contiguous().transpose(0, 2);  // same values, strided
    const Tensor out = cat(inputs, dim);
    Shape want_shape{2, 3, 3};
    want_shape[dim] = 6;
    ASSERT_EQ(out.shape(), want_shape);
    const std::vector<double> got = out.to_vector<double>();
    // Walk the output; find which input and which index along dim each element comes from.
    for (int64_t i = 0; i < want_shape[0]; ++i) {
      for (int64_t j = 0; j < want_shape[1]; ++j) {
        for (int64_t l = 0; l < want_shape[2]; ++l) {
          int64_t idx[3] = {i, j, l};
          int64_t k = 0;
          while (idx[dim] >= inputs[k].size(dim)) idx[dim] -= inputs[k++].size(dim);
          const std::vector<double> src = inputs[k].to_vector<double>();
          EXPECT_EQ(at(got, want_shape, i, j, l), at(src, inputs[k].shape(), idx[0], idx[1], idx[2]));
        }
      }
    }
  }
}

TEST(Join, StackAddsANewDimension) {
  Tensor a = from_vector({1, 2, 3}, {3});
  Tensor b = from_vector({4, 5, 6}, {3});
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(s0.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(s1.to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(stack({a, b}, -1).to_vector<double>(), s1.to_vector<double>());

  // Three [2, 3] tensors along each of the three possible positions; element picks checked.
  std::vector<Tensor> m{random_input({2, 3}, 1, false), random_input({2, 3}, 2, false).t().contiguous().t(),
                        random_input({2, 3}, 3, false)};
  EXPECT_EQ(stack(m, 0).shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(stack(m, 1).shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(stack(m, 2).shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(stack(m, 0)[1][0][2].item(), m[1][0][2].item());
  EXPECT_EQ(stack(m, 1)[1][2][0].item(), m[2][1][0].item());
  EXPECT_EQ(stack(m, 2)[0][1][1].item(), m[1][0][1].item());
}

TEST(Join, GradientIsEachInputsSlice) {
  Tensor a = ones({2, 2}, TensorOptions(f64).requires_grad(true));
  Tensor b = ones({2, 1}, TensorOptions(f64).requires_grad(true));
  Tensor frozen = ones({2, 3}, f64);
  cat({a, frozen, b}, 1).backward(arange(0, 12, 1, f64).reshape({2, 6}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 1, 6, 7}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{5, 11}));
}

TEST(Join, Gradcheck) {
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    std::vector<Tensor> inputs;
    for (int64_t k = 0; k < 3; ++k) {
      Shape shape{2, 3, 2};
      shape[dim < 0 ? dim + 3 : dim] = k + 1;
      inputs.push_back(random_input(shape, 20 + k));
    }
    EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return cat(in, dim); }, inputs));
  }
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "stack dim " << dim);
    EXPECT_TRUE(gradcheck([=](const std::vector<Tensor>& in) { return stack({in[0], in[1].t(), in[2]}, dim); },
                          {random_input({2, 3}, 30), random_input({3, 2}, 31), random_input({2, 3}, 32)}));
  }
}

TEST(Join, ErrorsNameTheOffendingTensor) {
  Tensor a = zeros({2, 3});
  EXPECT_EQ(error_message([] { cat({}); }), "cat: expected a non-empty list of tensors");
  EXPECT_EQ(error_message([] { stack({}); }), "stack: expected a non-empty list of tensors");
  EXPECT_EQ(error_message([&] { cat({a, a, zeros({2, 4})}, 0); }),
            "cat: sizes must match except in dimension 0, got [2, 3] (tensor 0) and [2, 4] (tensor 2), which differ in "
            "dimension 1");
  EXPECT_EQ(error_message([&] { cat({a, zeros({2, 3, 1})}, 1); }),
            "cat: expected all tensors to have the same number of dimensions, got [2, 3] (tensor 0) and [2, 3, 1] "
            "(tensor 1)");
  expect_error([&] { cat({a, zeros({2, 3}, f64)}); },
               "cat: expected all tensors to have the same dtype, got f32 (tensor 0) and f64 (tensor 1)");
  expect_error([&] { cat({full({}, 1.0), full({}, 2.0)}); }, "cat: tensor 0 is 0-d");
  EXPECT_EQ(error_message([&] { cat({a, a}, 2); }), "cat: dimension 2 is out of range for a 2-D tensor");
  EXPECT_EQ(error_message([&] { stack({a, zeros({3, 2})}); }),
            "stack: expected all tensors to have the same shape, got [2, 3] (tensor 0) and [3, 2] (tensor 1)");
  EXPECT_EQ(error_message([&] { stack({a, a}, 3); }), "stack: dimension 3 is out of range for a 3-D tensor");
  EXPECT_EQ(error_message([&] { cat({a, Tensor()}); }), "cat: tensor 1 is undefined");
}
