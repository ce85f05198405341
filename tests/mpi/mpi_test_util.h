// Helpers for the MPI tests: the group every test uses, tensors gathered from every rank, and
// comparing a tensor's elements across ranks.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep.h"

namespace lockstep::test {

/// The default process group (the MPI backend; see mpi_test_main.cpp).
inline ProcessGroup& group() { return default_process_group(); }

/// Every rank's copy of `t` (any shape), gathered on every rank: result[r] is rank r's.
inline std::vector<std::vector<double>> gather_from_all(const Tensor& t) {
  const Tensor flat = t.detach().contiguous().to(DType::f64).reshape({t.numel()});
  const Tensor all = empty({group().size() * t.numel()}, TensorOptions().dtype(DType::f64));
  group().all_gather(all, flat);
  std::vector<std::vector<double>> out;
  for (int r = 0; r < group().size(); ++r) out.push_back(all.slice(0, r * t.numel(), (r + 1) * t.numel()).to_vector<double>());
  return out;
}

/// Expects `t` to hold the same elements on every rank, compared exactly after conversion to
/// f64; `what` names the tensor and the situation in a failure message.
inline void expect_same_on_every_rank(const Tensor& t, const std::string& what) {
  const std::vector<std::vector<double>> copies = gather_from_all(t);
  for (size_t r = 1; r < copies.size(); ++r) EXPECT_EQ(copies[r], copies[0]) << what << ": rank " << r << " differs from rank 0";
}

}  // namespace lockstep::test
