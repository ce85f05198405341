// The chapters' program layer (chapters/common/program.h): a library error of a kind that one of
// the chapters' flags can fix gets that flag as advice; every other error keeps its message.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/program.h"
#include "test_util.h"

namespace lockstep {
namespace {

TEST(ErrorMessage, EachKindGetsTheFlagsThatFixIt) {
  const std::vector<std::pair<ErrorKind, std::string>> advice = {
      {ErrorKind::NoCudaDevice, "(use --device cpu)"},
      {ErrorKind::OutOfMemory, "(use a smaller --batch-size or model)"},
      {ErrorKind::NcclNeedsCuda, "(use --device cuda, or --backend mpi)"},
      {ErrorKind::NcclNeedsOneGpuPerRank, "(use --backend mpi, or fewer ranks)"},
      {ErrorKind::NcclNotBuilt, "(use --backend mpi)"},
      {ErrorKind::DataNotFound, "(use --data DIR to name the directory that holds them)"},
  };
  for (const auto& [kind, words] : advice) EXPECT_EQ(error_message(Error(kind, "it failed")), "it failed " + words);
}

TEST(ErrorMessage, OtherErrorsKeepTheirMessage) {
  EXPECT_EQ(error_message(Error("matmul: expected a 2-D tensor, got 3-D")), "matmul: expected a 2-D tensor, got 3-D");
  EXPECT_EQ(error_message(std::runtime_error("disk full")), "disk full");
}

// What a chapter prints for a GPU that is not there: the library's sentence, which says what a
// caller of the API can do, then the flag.
TEST(ErrorMessage, AnAbsentGpuEndsWithTheDeviceFlag) {
  const Device absent = Device::cuda(cuda_device_count());
  const auto allocate = [&] { empty({1}, TensorOptions().device(absent)); };
  const std::string reason = built_with_cuda()
                                 ? "this machine has " + std::to_string(cuda_device_count()) +
                                       " CUDA device(s); use Device::cpu(), or a device index below cuda_device_count()"
                                 : "Lockstep was built without CUDA; install the CUDA toolkit and rebuild, or use "
                                   "Device::cpu()";
  test::expect_error(allocate, ErrorKind::NoCudaDevice, "cannot use " + absent.str() + ": " + reason);
  try {
    allocate();
  } catch (const Error& e) {
    EXPECT_EQ(error_message(e), "cannot use " + absent.str() + ": " + reason + " (use --device cpu)");
  }
}

}  // namespace
}  // namespace lockstep
