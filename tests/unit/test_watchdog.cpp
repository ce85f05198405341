// The collective watchdog's parts that need no second rank: the settings and where they come
// from, how collectives are described and fingerprinted, the progress a rank reports, and the
// report and exit when a collective outlives its deadline (a death test, with a collective that
// never finishes and a stand-in for the other ranks' answers). The tests/mpi programs check the
// same under mpirun with real ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>
#include <map>
#include <string>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/collective_info.h"
#include "distributed/process_group_options.h"
#include "distributed/watchdog.h"

namespace lockstep {
namespace {

// A collective that finishes when the test says so.
class FakeWork : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return done; }
  std::atomic<bool> done{false};
};

std::function<const char*(const char*)> environment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto found = vars.find(name);
    return found == vars.end() ? nullptr : found->second.c_str();
  };
}

CollectiveInfo bucket_all_reduce(uint64_t seq) {
  CollectiveInfo info;
  info.seq = seq;
  info.op = "all_reduce";
  info.reduce = "sum";
  info.dtype = DType::f32;
  info.numel = 224800;
  info.bytes = 224800 * 4;
  info.caller = "DDP bucket 0";
  return info;
}

TEST(ProcessGroupOptions, CodeBeatsEnvironmentBeatsDefault) {
  EXPECT_EQ(ProcessGroupOptions().resolved_timeout(environment({})), ProcessGroupOptions::kDefaultTimeout);
  EXPECT_EQ(ProcessGroupOptions().resolved_timeout(environment({{"LOCKSTEP_COLLECTIVE_TIMEOUT", "2.5"}})), 2.5);
  EXPECT_EQ(ProcessGroupOptions().timeout(7).resolved_timeout(environment({{"LOCKSTEP_COLLECTIVE_TIMEOUT", "2.5"}})), 7);
  EXPECT_EQ(ProcessGroupOptions().resolved_debug(environment({})), DistributedDebug::off);
  EXPECT_EQ(ProcessGroupOptions().resolved_debug(environment({{"LOCKSTEP_DISTRIBUTED_DEBUG", "detail"}})),
            DistributedDebug::detail);
  EXPECT_EQ(ProcessGroupOptions()
                .debug(DistributedDebug::off)
                .resolved_debug(environment({{"LOCKSTEP_DISTRIBUTED_DEBUG", "DETAIL"}})),
            DistributedDebug::off);
}

TEST(ProcessGroupOptions, MalformedSettingsAreErrorsNamingThem) {
  for (const char* bad : {"ten", "10s", "5 ", " 5", "0x10", "-1", "inf", "nan", "1e999"}) {
    try {
      ProcessGroupOptions().resolved_timeout(environment({{"LOCKSTEP_COLLECTIVE_TIMEOUT", bad}}));
      ADD_FAILURE() << "accepted LOCKSTEP_COLLECTIVE_TIMEOUT=" << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("$LOCKSTEP_COLLECTIVE_TIMEOUT"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ProcessGroupOptions().timeout(-1), Error);
  EXPECT_THROW(ProcessGroupOptions().timeout(std::numeric_limits<double>::infinity()), Error);
  try {
    ProcessGroupOptions().resolved_debug(environment({{"LOCKSTEP_DISTRIBUTED_DEBUG", "INFO"}}));
    ADD_FAILURE() << "accepted LOCKSTEP_DISTRIBUTED_DEBUG=INFO";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected OFF or DETAIL, got \"INFO\""), std::string::npos) << e.what();
  }
}

TEST(CollectiveCaller, NamesNestAndUnwind) {
  EXPECT_EQ(CollectiveCaller::current(), "user code");
  {
    CollectiveCaller outer("DDP constructor checks");
    EXPECT_EQ(CollectiveCaller::current(), "DDP constructor checks");
    {
      CollectiveCaller inner("DDP bucket 2");
      EXPECT_EQ(CollectiveCaller::current(), "DDP bucket 2");
    }
    EXPECT_EQ(CollectiveCaller::current(), "DDP constructor checks");
  }
  EXPECT_EQ(CollectiveCaller::current(), "user code");
}

TEST(CollectiveInfo, DescribesOperationCallerAndSize) {
  EXPECT_EQ(bucket_all_reduce(57).describe(), "#57 all_reduce (sum) of DDP bucket 0: 224,800 f32 elements, 878 KiB");
  CollectiveInfo broadcast;
  broadcast.seq = 3;
  broadcast.op = "broadcast";
  broadcast.root = 0;
  broadcast.dtype = DType::i64;
  broadcast.numel = 1;
  broadcast.bytes = 8;
  broadcast.caller = "user code";
  EXPECT_EQ(broadcast.describe(), "#3 broadcast from rank 0 of user code: 1 i64 elements, 8 B");
  EXPECT_EQ(with_thousands(0), "0");
  EXPECT_EQ(with_thousands(999), "999");
  EXPECT_EQ(with_thousands(1000), "1,000");
  EXPECT_EQ(with_thousands(-1234567), "-1,234,567");
}

TEST(Fingerprint, MatchesOnlyTheSameCollective) {
  const Fingerprint a = Fingerprint::of(bucket_all_reduce(57));
  EXPECT_TRUE(a.matches(Fingerprint::of(bucket_all_reduce(57))));
  EXPECT_FALSE(a.matches(Fingerprint::of(bucket_all_reduce(58))));
  CollectiveInfo other = bucket_all_reduce(57);
  other.caller = "DDP bucket 1";
  EXPECT_FALSE(a.matches(Fingerprint::of(other)));
  other = bucket_all_reduce(57);
  other.numel = 1290;
  EXPECT_FALSE(a.matches(Fingerprint::of(other)));
  other = bucket_all_reduce(57);
  other.reduce = "max";
  EXPECT_FALSE(a.matches(Fingerprint::of(other)));
  other = bucket_all_reduce(57);
  other.dtype = DType::bf16;
  EXPECT_FALSE(a.matches(Fingerprint::of(other)));
  EXPECT_EQ(a.describe(), "#57 all_reduce (sum) of DDP bucket 0: 224,800 f32 elements");
  // A long caller name is cut in the record, but still compared in full through its hash.
  CollectiveInfo long_name = bucket_all_reduce(1);
  long_name.caller = std::string(200, 'x');
  const Fingerprint cut = Fingerprint::of(long_name);
  long_name.caller.back() = 'y';
  EXPECT_FALSE(cut.matches(Fingerprint::of(long_name)));
  EXPECT_NE(cut.describe().find(std::string(87, 'x')), std::string::npos);
}

TEST(Watchdog, ReportsProgressForOtherRanks) {
  Watchdog dog(1000, 0, 2, 0.0, WatchdogHooks{});
  EXPECT_EQ(Watchdog::progress_of_group(1000)->started, 0u);
  EXPECT_FALSE(Watchdog::progress_of_group(1001).has_value());
  auto first = std::make_shared<FakeWork>();
  dog.started(bucket_all_reduce(1), first);
  PeerProgress p = *Watchdog::progress_of_group(1000);
  EXPECT_EQ(p.started, 1u);
  EXPECT_FALSE(p.finished);
  EXPECT_EQ(p.waiting_in, bucket_all_reduce(1).describe());
  first->done = true;
  auto second = std::make_shared<FakeWork>();
  second->done = true;
  dog.started(bucket_all_reduce(2), second);
  p = dog.progress();
  EXPECT_EQ(p.started, 2u);
  EXPECT_TRUE(p.finished);
  EXPECT_EQ(p.waiting_in, bucket_all_reduce(2).describe());
}

// The exit of a job whose rank 1 froze: ask_peers finds nobody, end_job exits as MPI_Abort would.
TEST(WatchdogDeathTest, AnOverdueCollectiveEndsTheJobNamingTheMissingRanks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto frozen_peer = [] {
    WatchdogHooks hooks;
    hooks.ask_peers = [](uint64_t) {
      std::vector<std::optional<PeerProgress>> answers(3);
      PeerProgress same;
      same.started = 57;
      same.finished = false;
      same.waiting_in = bucket_all_reduce(57).describe();
      answers[2] = same;  // rank 2 waits with us; rank 1 does not answer
      return answers;
    };
    hooks.end_job = [](int code) { std::_Exit(code); };
    Watchdog dog(2000, 0, 3, 0.2, hooks);
    dog.started(bucket_all_reduce(57), std::make_shared<FakeWork>());
    std::this_thread::sleep_for(std::chrono::seconds(30));
  };
  EXPECT_EXIT(frozen_peer(), ::testing::ExitedWithCode(kWatchdogExitCode),
              "rank 0/3. watchdog: #57 all_reduce .sum. of DDP bucket 0: 224,800 f32 elements, 878 KiB has not "
              "finished 0.2.* s after this rank started it .the collective timeout is 0.2 s.*rank 1 did not answer.*"
              "rank 2 waits in the same collective.*Rank.s. that never reached #57: 1\\.");
}

TEST(WatchdogDeathTest, ABackendErrorEndsTheJob) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto failing_backend = [] {
    WatchdogHooks hooks;
    hooks.async_error = [] { return std::string("NCCL reports an asynchronous error: remote process exited"); };
    hooks.end_job = [](int code) { std::_Exit(code); };
    Watchdog dog(3000, 1, 2, 10.0, hooks);
    std::this_thread::sleep_for(std::chrono::seconds(30));
  };
  EXPECT_EXIT(failing_backend(), ::testing::ExitedWithCode(kWatchdogExitCode),
              "rank 1/2. watchdog: the communication backend failed: NCCL reports an asynchronous error");
}

TEST(Watchdog, AFinishedCollectiveIsNotOverdue) {
  std::atomic<bool> ended{false};
  WatchdogHooks hooks;
  hooks.end_job = [&](int) { ended = true; };
  {
    Watchdog dog(4000, 0, 2, 0.05, hooks);
    auto work = std::make_shared<FakeWork>();
    work->done = true;
    dog.started(bucket_all_reduce(1), work);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_FALSE(ended);
}

}  // namespace
}  // namespace lockstep
