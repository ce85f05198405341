// The chapters' program layer (chapters/common/): a library error of a kind that one of the
// chapters' flags can fix gets that flag as advice, every other error keeps its message; number
// flags take only numbers that make sense, output files are tried before the work, and a loss
// that became inf or NaN ends training with its steps named; a stop signal is noted for the step
// boundary, and the command that resumes a stopped run repeats its flags.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/named_datasets.h"
#include "common/preemption.h"
#include "common/program.h"
#include "common/training_loss.h"
#include "data/cifar10.h"
#include "temp_dir.h"
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
      {ErrorKind::CollectiveTimeout, "(use the same --collective-timeout on every rank)"},
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

// What CLI11 answers when `value` is given to a flag of type T checked by `validator`: its
// message, or "" when the value is taken (then `*taken`, when given, holds what the flag got).
template <class T>
std::string refusal(const CLI::Validator& validator, const std::string& value, T* taken = nullptr) {
  CLI::App app;
  T variable{};
  app.add_option("--flag", variable)->check(validator);
  try {
    app.parse("--flag " + value, false);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  if (taken != nullptr) *taken = variable;
  return "";
}

TEST(NumberFlags, TakeFiniteNumbersOnly) {
  for (const std::string value : {"inf", "-inf", "nan", "1e999"}) {
    EXPECT_EQ(refusal<double>(positive_number(), value),
              "--flag: expected a number above 0, got '" + value + "': a flag takes finite numbers only");
    EXPECT_EQ(refusal<double>(non_negative_number(), value),
              "--flag: expected a number of 0 or more, got '" + value + "': a flag takes finite numbers only");
  }
  EXPECT_EQ(refusal<double>(positive_number(), "0"), "--flag: expected a number above 0, got '0'");
  EXPECT_EQ(refusal<double>(non_negative_number(), "-1"), "--flag: expected a number of 0 or more, got '-1'");
  EXPECT_EQ(refusal<double>(positive_number(), "fast"), "--flag: expected a number above 0, got 'fast'");
  double taken = 0;
  EXPECT_EQ(refusal<double>(positive_number(), "1e-3", &taken), "");
  EXPECT_EQ(taken, 1e-3);
  EXPECT_EQ(refusal<double>(non_negative_number(), "0"), "");
}

// CLI11 converts with strtoll and does not look at errno: without the check, a number too large
// for 64 bits would reach the program as 2^63 - 1.
TEST(NumberFlags, RefuseWholeNumbersBeyond64BitsInsteadOfClampingThem) {
  const std::string largest = std::to_string(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(refusal<int64_t>(non_negative_number(), "99999999999999999999"),
            "--flag: expected a number of 0 or more, got '99999999999999999999': the largest whole number a flag "
            "takes is " + largest);
  EXPECT_NE(refusal<uint64_t>(non_negative_number(), "99999999999999999999"), "");
  EXPECT_NE(refusal<int64_t>(positive_number(), "-99999999999999999999"), "");
  int64_t taken = 0;
  EXPECT_EQ(refusal<int64_t>(positive_number(), largest, &taken), "");
  EXPECT_EQ(taken, std::numeric_limits<int64_t>::max());
  // A real-valued flag takes a large number written with an exponent.
  EXPECT_EQ(refusal<double>(positive_number(), "1e20"), "");
}

// strtoll, as CLI11 calls it, reads "010" as octal (8) and "0x10" as hexadecimal (16).
TEST(NumberFlags, RefuseWholeNumbersNotWrittenInDecimal) {
  for (const std::string value : {"010", "0x10"}) {
    EXPECT_EQ(refusal<int64_t>(non_negative_number(), value),
              "--flag: expected a number of 0 or more, got '" + value +
                  "': write whole numbers in decimal, without a leading 0 or 0x");
  }
  int64_t taken = 0;
  EXPECT_EQ(refusal<int64_t>(positive_number(), "+10", &taken), "");
  EXPECT_EQ(taken, 10);
  EXPECT_EQ(refusal<int64_t>(non_negative_number(), "0", &taken), "");
  EXPECT_EQ(taken, 0);
}

TEST(NumberFlags, BetweenTakesBothEndsAndRefusesNaN) {
  for (const std::string value : {"0", "0.9", "1"}) EXPECT_EQ(refusal<double>(number_between(0, 1), value), "");
  EXPECT_EQ(refusal<double>(number_between(0, 1), "1.5"), "--flag: expected a number from 0 to 1, got '1.5'");
  EXPECT_EQ(refusal<double>(number_between(0, 1), "-0.1"), "--flag: expected a number from 0 to 1, got '-0.1'");
  EXPECT_EQ(refusal<double>(number_between(0, 1), "nan"),
            "--flag: expected a number from 0 to 1, got 'nan': a flag takes finite numbers only");
}

// A thread count far beyond any machine is refused by the flag, before the OpenMP runtime,
// which cannot start that many threads, sees it.
TEST(NumberFlags, ThreadCountStopsAtItsLimit) {
  const std::string limit = std::to_string(kMaxThreads);
  EXPECT_EQ(refusal<int>(thread_count(), "0"), "");
  EXPECT_EQ(refusal<int>(thread_count(), limit), "");
  EXPECT_EQ(refusal<int>(thread_count(), "100000"), "--flag: expected a number from 0 to " + limit + ", got '100000'");
  EXPECT_EQ(refusal<int>(thread_count(), std::to_string(kMaxThreads + 1)),
            "--flag: expected a number from 0 to " + limit + ", got '" + std::to_string(kMaxThreads + 1) + "'");
}

// Every test works in a fresh directory of its own, removed afterwards.
using OutputFile = test::TempDirTest;

TEST_F(OutputFile, ANewFileIsTriedAndNotLeftBehind) {
  check_output_file("--save", file("model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(file("model.safetensors")));
  check_output_file("--save", "");  // the flag not given
}

TEST_F(OutputFile, AnExistingFileIsTriedAndNotChanged) {
  std::ofstream(file("old.csv")) << "step,epoch\n";
  check_output_file("--metrics", file("old.csv"));
  std::stringstream contents;
  contents << std::ifstream(file("old.csv")).rdbuf();
  EXPECT_EQ(contents.str(), "step,epoch\n");
}

TEST_F(OutputFile, AMissingFolderOrAFolderInsteadOfAFileIsRefused) {
  EXPECT_EQ(test::error_message([&] { check_output_file("--trace", file("no-such-dir/t.json")); }),
            "--trace " + file("no-such-dir/t.json") + ": the folder '" + file("no-such-dir") + "' does not exist");
  EXPECT_EQ(test::error_message([&] { check_output_file("--save", dir()); }),
            "--save " + dir() + ": this is a folder; name a file to write, in it or elsewhere");
}

// File permissions mean nothing to root, so a read-only place is one whose file system takes no
// new files from anyone: /sys (Linux), where sysfs is mounted. In a chroot or a container
// without it, /sys is a plain folder (no /sys/kernel) that root can write to.
TEST_F(OutputFile, APlaceThatTakesNoFilesIsRefused) {
  if (!std::filesystem::is_directory("/sys/kernel")) GTEST_SKIP() << "sysfs is not mounted on /sys here";
  test::expect_error([] { check_output_file("--save", "/sys/lockstep-test.safetensors"); },
                     "--save /sys/lockstep-test.safetensors: cannot write this file (");
}

TEST(TrainingLoss, FiniteLossesPass) {
  check_training_loss(2.31, 1, 1, 1);
  check_training_loss(46.2, 20, 40, 1);
  check_training_loss(std::numeric_limits<double>::quiet_NaN(), 0, 40, 1);  // a window of no steps
}

TEST(TrainingLoss, ANonFiniteLossNamesItsStepsAndTheFlagToLower) {
  EXPECT_EQ(test::error_message([] { check_training_loss(std::numeric_limits<double>::quiet_NaN(), 1, 37, 1); }),
            "the training loss became nan at step 37 (epoch 1): the training diverged; try a lower --lr");
  EXPECT_EQ(test::error_message([] { check_training_loss(std::numeric_limits<double>::infinity(), 20, 40, 2); }),
            "the training loss became inf in steps 21-40 (epoch 2): the training diverged; try a lower --lr");
  EXPECT_EQ(test::error_message([] { check_training_loss(-std::numeric_limits<double>::infinity(), 3, 3, 1); }),
            "the training loss became -inf in steps 1-3 (epoch 1): the training diverged; try a lower --lr");
}

// The chapters' CIFAR-10: the real dataset's 10000 records per file, or a smaller made-up copy
// whose first training file sets the count, which every other file must then match.
TEST(NamedDatasets, AMadeUpCifar10SetsItsCountAndAFileCutShortIsNamed) {
  const test::TempDir dir("cifar10");
  const auto write = [&](const std::string& name, int64_t records) {
    std::ofstream(dir.file(name), std::ios::binary) << std::string(records * kCifar10RecordBytes, '\1');
  };
  for (int b = 1; b <= 5; ++b) write("data_batch_" + std::to_string(b) + ".bin", 2);
  write("test_batch.bin", 2);
  const TrainTestSets sets = load_train_test("cifar10", dir.path());
  EXPECT_EQ(sets.train->size(), 10);
  EXPECT_EQ(sets.test->size(), 2);
  // data_batch_3.bin cut at a record boundary: whole records, but one fewer than the others.
  write("data_batch_3.bin", 1);
  test::expect_error([&] { load_train_test("cifar10", dir.path()); }, "data_batch_3.bin' holds 3073 bytes");
}

// A stop signal is noted, not acted on: the training loop reads it at a step boundary.
TEST(StopSignals, TheFirstSignalIsNotedAndTheProcessGoesOn) {
  for (const int signal : {SIGUSR1, SIGTERM, SIGINT}) {
    const StopSignals signals;
    EXPECT_EQ(signals.received(), 0);
    std::raise(signal);
    EXPECT_EQ(signals.received(), signal);
  }
}

// A second signal means "now": the process ends by it, as without a handler.
TEST(StopSignals, ASecondSignalEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        const StopSignals signals;
        std::raise(SIGTERM);
        if (signals.received() != SIGTERM) std::exit(1);
        std::raise(SIGTERM);
        std::exit(0);
      },
      testing::KilledBySignal(SIGTERM), "");
}

// The handlers last as long as the watch: afterwards a signal does what it did before.
TEST(StopSignals, TheDestructorPutsThePreviousHandlerBack) {
  EXPECT_EXIT(
      {
        { const StopSignals signals; }
        std::raise(SIGUSR1);
        std::exit(0);
      },
      testing::KilledBySignal(SIGUSR1), "");
}

TEST(ResumeCommand, RepeatsTheFlagsWithTheNewResumeQuotedForTheShell) {
  EXPECT_EQ(resume_command({"./chapter6", "--epochs", "2", "--resume", "old.safetensors", "--lr=0.1"}, 2,
                           "run 1/ck.safetensors"),
            "mpirun -n 2 ./chapter6 --epochs 2 --lr=0.1 --resume 'run 1/ck.safetensors'");
  EXPECT_EQ(resume_command({"./chapter6", "--resume=old", "--data", "it's here"}, 1, "ck"),
            "./chapter6 --data 'it'\\''s here' --resume ck");
}

}  // namespace
}  // namespace lockstep
