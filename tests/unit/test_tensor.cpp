// Tensors: factories, views and strides, dtype conversions, element access, printing.
#include <gtest/gtest.h>

#include "lockstep.h"

using namespace lockstep;

TEST(Tensor, FactoriesHaveShapeDtypeAndValues) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(sum(ones({4, 5})).item(), 20.0);
  EXPECT_EQ(full({2}, 7.5, TensorOptions().dtype(DType::f64)).to_vector<double>(), (std::vector<double>{7.5, 7.5}));
  EXPECT_EQ(arange(0, 5).to_vector<int>(), (std::vector<int>{0, 1, 2, 3, 4}));
}
