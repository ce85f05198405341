// The timeline of util/trace.h: spans recorded only while tracing is on (or observed), nested on
// the row of the thread that made them, written as Chrome trace events that parse as JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lockstep.h"
#include "test_util.h"
#include "util/trace.h"
#include "temp_dir.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// The events recorded so far, parsed, with times measured from the start of the recording.
nlohmann::json recorded_events(int pid = 0) {
  return nlohmann::json::parse("[" + trace_events_json(pid, "rank " + std::to_string(pid), trace_start_us()) + "]");
}

// The span named `name` (ph "X"); fails the test if there is not exactly one.
nlohmann::json span_named(const nlohmann::json& events, const std::string& name) {
  nlohmann::json found;
  int count = 0;
  for (const auto& event : events) {
    if (event["ph"] == "X" && event["name"] == name) {
      found = event;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "spans named " << name;
  return found;
}

// The name metadata gives row `tid`.
std::string row_name(const nlohmann::json& events, int tid) {
  for (const auto& event : events) {
    if (event["ph"] == "M" && event["name"] == "thread_name" && event["tid"] == tid) return event["args"]["name"];
  }
  return "(no name)";
}

}  // namespace

TEST(Trace, RecordsNothingWhileOffOrUnnamed) {
  enable_trace();
  { const RecordFunction span("", "test"); }
  { const RecordFunction span([] { return std::string(); }, "test"); }
  disable_trace();
  { const RecordFunction span("ignored"); }
  EXPECT_FALSE(trace_enabled());
  EXPECT_EQ(trace_span_count(), 0);
}

TEST(Trace, ANameBuiltAtRunTimeIsBuiltOnlyWhenRecorded) {
  int built = 0;
  const auto make_name = [&] {
    ++built;
    return std::string("built");
  };
  { const RecordFunction span(make_name, "test"); }
  EXPECT_EQ(built, 0);
  enable_trace();
  { const RecordFunction span(make_name, "test"); }
  disable_trace();
  EXPECT_EQ(built, 1);
  EXPECT_EQ(trace_span_count(), 1);
}

// Sums the spans it receives by name, and counts the calls before each clock reading.
class SummingObserver : public SpanObserver {
 public:
  void before_clock() override { ++clock_readings; }
  void span_closed(const std::string& name, double seconds) override {
    EXPECT_GE(seconds, 0.0);
    ++closed[name];
  }
  int clock_readings = 0;
  std::map<std::string, int> closed;
};

TEST(Trace, AnObserverReceivesTheSpansOfItsCategoryWhetherTracingOrNot) {
  const auto observer = std::make_shared<SummingObserver>();
  int built = 0;
  {
    const SpanObservation observation("observed", observer);
    { const RecordFunction span("phase", "observed"); }
    {
      const RecordFunction span(
          [&] {
            ++built;
            return std::string("phase");
          },
          "observed");
    }
    { const RecordFunction span("other category", "test"); }
    { const RecordFunction span("", "observed"); }  // unnamed: nothing
  }
  { const RecordFunction span("after the observation", "observed"); }
  EXPECT_FALSE(trace_enabled());
  EXPECT_EQ(built, 1);
  EXPECT_EQ(observer->closed, (std::map<std::string, int>{{"phase", 2}}));
  EXPECT_EQ(observer->clock_readings, 4);  // as each of the two spans opened and closed
}

TEST(Trace, SpansNestOnTheRowOfTheirThread) {
  enable_trace();
  {
    const RecordFunction outer("outer", "test");
    { const RecordFunction inner("inner", "test"); }
    std::thread helper([] {
      set_trace_thread_name("helper");
      const RecordFunction span("on the helper", "test");
    });
    helper.join();
  }
  disable_trace();
  EXPECT_EQ(trace_span_count(), 3);
  const nlohmann::json events = recorded_events(3);
  const nlohmann::json outer = span_named(events, "outer"), inner = span_named(events, "inner");
  const nlohmann::json helper = span_named(events, "on the helper");
  // The inner span lies within the outer one, on the same row (the main thread's, row 0).
  EXPECT_EQ(outer["tid"], 0);
  EXPECT_EQ(inner["tid"], 0);
  EXPECT_GE(outer["ts"].get<double>(), 0.0);
  EXPECT_GE(inner["ts"].get<double>(), outer["ts"].get<double>());
  EXPECT_LE(inner["ts"].get<double>() + inner["dur"].get<double>(),
            outer["ts"].get<double>() + outer["dur"].get<double>());
  EXPECT_EQ(inner["cat"], "test");
  EXPECT_EQ(inner["pid"], 3);
  // The helper's span is on a row of its own, named as the thread asked.
  EXPECT_NE(helper["tid"], 0);
  EXPECT_EQ(row_name(events, helper["tid"]), "helper");
  EXPECT_EQ(row_name(events, 0), "main");
}

// Threads of one name that ran one after another (each epoch's DataLoader worker) are drawn on
// one row; threads of that name running at the same time keep rows of their own.
TEST(Trace, ThreadsOfOneNameShareARowUnlessTheyOverlap) {
  const auto worker = [](const char* span_name, std::promise<void>* started, std::shared_future<void> release) {
    set_trace_thread_name("worker");
    const RecordFunction span(span_name, "test");
    if (started) started->set_value();
    if (release.valid()) release.wait();
  };
  enable_trace();
  // One after another: the first thread has ended before the second starts.
  std::thread(worker, "first", nullptr, std::shared_future<void>()).join();
  std::thread(worker, "second", nullptr, std::shared_future<void>()).join();
  // At the same time: both spans are open at once.
  std::promise<void> third_started, fourth_started, release;
  const std::shared_future<void> released = release.get_future().share();
  std::thread third(worker, "third", &third_started, released);
  std::thread fourth(worker, "fourth", &fourth_started, released);
  third_started.get_future().wait();
  fourth_started.get_future().wait();
  release.set_value();
  third.join();
  fourth.join();
  disable_trace();
  const nlohmann::json events = recorded_events();
  const auto tid = [&](const char* name) { return span_named(events, name)["tid"].get<int>(); };
  EXPECT_EQ(tid("first"), tid("second"));
  EXPECT_NE(tid("third"), tid("fourth"));
  int worker_rows = 0;
  for (const auto& event : events) worker_rows += event["ph"] == "M" && event["name"] == "thread_name" && event["args"]["name"] == "worker";
  EXPECT_EQ(worker_rows, 2) << "first, second and one of third and fourth on one row; the other on a second";
}

TEST(Trace, BackwardShowsEveryNodeItRan) {
  Tensor w = ones({3}).requires_grad_();
  Tensor x = full({3}, 2.0);
  enable_trace();
  sum(w * x).backward();
  disable_trace();
  const nlohmann::json events = recorded_events();
  const nlohmann::json backward = span_named(events, "backward");
  for (const char* node : {"SumBackward", "MulBackward", "AccumulateGrad"}) {
    const nlohmann::json span = span_named(events, node);
    EXPECT_EQ(span["cat"], "autograd");
    EXPECT_GE(span["ts"].get<double>(), backward["ts"].get<double>()) << node;
  }
}

TEST(Trace, ModulesShowAsNestedForwardSpans) {
  Sequential net(std::make_shared<Linear>(3, 2), std::make_shared<ReLU>());
  enable_trace();
  net(ones({4, 3}));
  disable_trace();
  const nlohmann::json events = recorded_events();
  const nlohmann::json outer = span_named(events, "Sequential.forward");
  for (const char* inner : {"Linear.forward", "ReLU.forward"}) {
    const nlohmann::json span = span_named(events, inner);
    EXPECT_EQ(span["cat"], "module");
    EXPECT_GE(span["ts"].get<double>(), outer["ts"].get<double>()) << inner;
  }
}

// DataParallel's four phases are spans inside its forward, and replica 1's forward pass is on
// a row of its own, named after it (replica 0 runs on the caller's row).
TEST(Trace, DataParallelShowsItsPhasesAndEachReplicaOnItsRow) {
  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(3, 2));
  DataParallel parallel(model, {Device::cpu(), Device::cpu()});
  enable_trace();
  parallel(ones({4, 3}));
  disable_trace();
  const nlohmann::json events = recorded_events();
  const nlohmann::json outer = span_named(events, "DataParallel.forward");
  for (const char* phase : {"scatter", "replicate", "parallel_apply", "gather"}) {
    const nlohmann::json span = span_named(events, phase);
    EXPECT_EQ(span["cat"], "parallel");
    EXPECT_EQ(span["tid"], outer["tid"]) << phase;
    EXPECT_GE(span["ts"].get<double>(), outer["ts"].get<double>()) << phase;
  }
  std::vector<std::string> rows;
  for (const auto& event : events) {
    if (event["ph"] == "X" && event["name"] == "Sequential.forward") rows.push_back(row_name(events, event["tid"]));
  }
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, (std::vector<std::string>{"main", "replica 1"}));
}

TEST(Trace, SizesAreRoundedToWholeUnits) {
  EXPECT_EQ(bytes_str(0), "0 B");
  EXPECT_EQ(bytes_str(1023), "1023 B");
  EXPECT_EQ(bytes_str(1024), "1 KiB");
  EXPECT_EQ(bytes_str(900149), "879 KiB");
  EXPECT_EQ(bytes_str(1048575), "1 MiB");
  EXPECT_EQ(bytes_str(16 << 20), "16 MiB");
}

TEST(Trace, WritesAFileThatParsesAndSaysWhyItCannot) {
  enable_trace();
  { const RecordFunction span("written", "test"); }
  disable_trace();
  const TempDir dir("trace");
  const std::string path = dir.file("trace.json");
  write_trace_file(path, trace_events_json(0, "rank 0", trace_start_us()));
  std::ifstream file(path);
  const nlohmann::json trace = nlohmann::json::parse(file);
  ASSERT_TRUE(trace["traceEvents"].is_array());
  span_named(trace["traceEvents"], "written");
  expect_error([] { write_trace_file("/no-such-dir/trace.json", ""); },
               "trace: cannot open '/no-such-dir/trace.json' for writing");
}

// save_trace: stop, write one process's spans, say how many.
TEST(Trace, SaveTraceStopsAndWritesThisProcesssSpans) {
  enable_trace();
  { const RecordFunction span("saved", "test"); }
  const TempDir dir("trace");
  const std::string path = dir.file("trace.json");
  EXPECT_EQ(save_trace(path, "program"), 1);
  EXPECT_FALSE(trace_enabled());
  std::ifstream file(path);
  const nlohmann::json events = nlohmann::json::parse(file)["traceEvents"];
  EXPECT_EQ(span_named(events, "saved")["cat"], "test");
  bool named = false;
  for (const auto& event : events) named = named || (event["name"] == "process_name" && event["args"]["name"] == "program");
  EXPECT_TRUE(named);
}
