// dropout: how many elements are dropped, how survivors are scaled, reproducibility from a
// seed, the identity cases (eval, p = 0), the gradient, and the errors for a bad p; and the
// mask's rule itself: Philox-4x32-10 against Random123's known answers, and the CPU kernel's
// mask against the rule computed here element by element, with any number of threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "lockstep.h"
#include "tensor/ops/dispatch/dropout_kernels.h"
#include "tensor/ops/rules/philox.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

TEST(Dropout, DropsAboutPAndScalesSurvivors) {
  const double p = 0.3;
  const Tensor x = rand({400, 500}) + 1.0;  // in [1, 2): never zero before dropout
  Generator g(7);
  const Tensor out = dropout(x, p, true, &g);
  const std::vector<float> in = x.to_vector<float>(), o = out.to_vector<float>();
  int64_t zeros_seen = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i] == 0.0f) {
      ++zeros_seen;
    } else {
      EXPECT_FLOAT_EQ(o[i], in[i] / (1.0f - static_cast<float>(p)));  // inverted dropout
    }
  }
  // 200000 draws: the standard deviation of the fraction is about 0.001.
  EXPECT_NEAR(static_cast<double>(zeros_seen) / static_cast<double>(o.size()), p, 0.01);
  // So the mean is preserved on average.
  EXPECT_NEAR(mean(out).item(), mean(x).item(), 0.01);
}

TEST(Dropout, SameSeedSameMask) {
  const Tensor x = ones({64, 32});
  Generator a(42), b(42), c(43);
  const std::vector<float> first = dropout(x, 0.5, true, &a).to_vector<float>();
  EXPECT_EQ(first, dropout(x, 0.5, true, &b).to_vector<float>());
  EXPECT_NE(first, dropout(x, 0.5, true, &c).to_vector<float>());
  // A generator moves on: the next call draws a new mask.
  EXPECT_NE(first, dropout(x, 0.5, true, &a).to_vector<float>());
  // Without a generator the default one is used, which manual_seed resets.
  manual_seed(5);
  const std::vector<float> d1 = dropout(x, 0.5, true).to_vector<float>();
  manual_seed(5);
  EXPECT_EQ(d1, dropout(x, 0.5, true).to_vector<float>());
}

TEST(Dropout, IdentityInEvalAndForZeroP) {
  const Tensor x = randn({3, 4});
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
}

TEST(Dropout, POneGivesZerosAndZeroGradient) {
  const Tensor x = (rand({5, 6}, TensorOptions().dtype(DType::f64)) + 1.0).detach().requires_grad_(true);
  const Tensor out = dropout(x, 1.0, true);
  for (double v : out.to_vector<double>()) EXPECT_EQ(v, 0.0);
  sum(out).backward();
  for (double v : x.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(Dropout, BackwardUsesTheSameScaledMask) {
  const double p = 0.25;
  const Tensor x = (rand({20, 10}, TensorOptions().dtype(DType::f64)) + 1.0).detach().requires_grad_(true);
  Generator g(3);
  const Tensor out = dropout(x, p, true, &g);
  sum(out).backward();
  const std::vector<double> o = out.to_vector<double>(), grad = x.grad().to_vector<double>();
  for (size_t i = 0; i < o.size(); ++i) EXPECT_EQ(grad[i], o[i] == 0.0 ? 0.0 : 1.0 / (1.0 - p));
}

TEST(Dropout, GradientMatchesFiniteDifferences) {
  // Reseeding inside the function makes every evaluation draw the same mask.
  Generator g;
  const auto fn = [&](const std::vector<Tensor>& t) {
    g.manual_seed(11);
    return dropout(t[0], 0.4, true, &g);
  };
  EXPECT_TRUE(gradcheck(fn, {random_input({6, 7}, 1)}));
}

TEST(Dropout, Errors) {
  const Tensor x = ones({4});
  EXPECT_EQ(error_message([&] { dropout(x, -0.1, true); }),
            "dropout: expected a probability p between 0 and 1, got -0.1");
  EXPECT_EQ(error_message([&] { dropout(x, 1.5, true); }),
            "dropout: expected a probability p between 0 and 1, got 1.5");
  // A bad p is an error in eval mode too, as in PyTorch.
  expect_error([&] { dropout(x, 2.0, false); }, "dropout: expected a probability");
  EXPECT_EQ(error_message([] { dropout(from_vector(std::vector<int64_t>{1, 2}, {2}), 0.5, true); }),
            "dropout: expected a floating-point input, got i64");
  expect_error([] { dropout(Tensor(), 0.5, true); }, "dropout");
}

TEST(Dropout, PhiloxGivesRandom123sKnownAnswers) {
  // Random123's tests/kat_vectors, "philox4x32 10": counter (4 words), key (key[0], key[1]),
  // expected words. key[0] is the low half of Lockstep's 64-bit key.
  struct Case {
    Philox4x32 counter;
    uint64_t key;
    Philox4x32 expected;
  };
  const Case cases[] = {
      {{{0u, 0u, 0u, 0u}}, 0u, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0x299f31d0a4093822u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Case& c : cases) {
    const Philox4x32 bits = philox4x32_10(c.counter, c.key);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(bits.word[j], c.expected.word[j]) << "key " << c.key << " word " << j;
  }
}

TEST(Dropout, CpuMaskIsPhiloxsRuleElementByElementWithAnyThreadCount) {
  // p = 1/4: the threshold round(3/4 * 2^32) = 0xC0000000 is exact. n is odd, so the last group
  // of four is partial, and large enough that the kernel runs on several threads.
  const double p = 0.25, scale = 1.0 / (1.0 - p);
  const int64_t n = 100003;
  const uint64_t key = Generator(2024).next();  // the kernel's one draw
  std::vector<bool> kept(static_cast<size_t>(n));
  int64_t kept_count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t group = static_cast<uint64_t>(i / 4);
    const Philox4x32 counter{{0u, 0u, static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32)}};
    kept[static_cast<size_t>(i)] = philox4x32_10(counter, key).word[i % 4] < 0xC0000000u;
    kept_count += kept[static_cast<size_t>(i)];
  }
  ASSERT_GT(kept_count, 0);
  ASSERT_LT(kept_count, n);

  const int saved_threads = get_num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      const Tensor mask = empty({n}, TensorOptions().dtype(dtype));
      Generator generator(2024);
      cpu::dropout_mask_kernel(mask, p, scale, &generator);
      // One 64-bit draw and no more: the generator's next number is its second.
      Generator reference(2024);
      reference.next();
      EXPECT_EQ(generator.next(), reference.next()) << dtype_name(dtype);
      const double rounded_scale = full({}, scale, TensorOptions().dtype(dtype)).item();
      const std::vector<double> values = mask.to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        const double expected = kept[static_cast<size_t>(i)] ? rounded_scale : 0.0;
        if (values[static_cast<size_t>(i)] != expected) {
          ADD_FAILURE() << dtype_name(dtype) << ", " << threads << " threads: element " << i << " is "
                        << values[static_cast<size_t>(i)] << ", expected " << expected;
          break;
        }
      }
    }
  }
  set_num_threads(saved_threads);
}

TEST(Dropout, TheThresholdKeepsEverythingForPZeroAndNothingForPOne) {
  // The threshold rounds (1 - p) 2^32 to the nearest integer: p = 0 keeps every word, p = 1 none.
  EXPECT_EQ(dropout_threshold(0.0), 4294967296u);
  EXPECT_EQ(dropout_threshold(1.0), 0u);
  EXPECT_EQ(dropout_threshold(0.25), 0xC0000000u);
  EXPECT_EQ(dropout_threshold(1.0 / 3.0), 2863311531u);  // (2/3) 2^32 = 2863311530.67 rounds up
  const Tensor all = empty({9}), none = empty({9});
  Generator generator(1);
  cpu::dropout_mask_kernel(all, 0.0, 1.0, &generator);
  cpu::dropout_mask_kernel(none, 1.0, 1.0, &generator);  // a scale of 1: the zeros are the rule's
  EXPECT_EQ(all.to_vector<float>(), std::vector<float>(9, 1.0f));
  EXPECT_EQ(none.to_vector<float>(), std::vector<float>(9, 0.0f));
}
