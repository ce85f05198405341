// One trace file for the whole job: every rank's spans, each rank a process of its own, on a
// time axis that starts at zero.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "mpi_test_util.h"
#include "util/trace.h"

using namespace lockstep;
using namespace lockstep::test;

TEST(ExportTrace, GathersEveryRanksSpansIntoOneFile) {
  const std::string path = "mpi_test_trace.json";
  enable_trace();
  { const RecordFunction span([] { return "work of rank " + std::to_string(group().rank()); }, "test"); }
  group().all_reduce(ones({1000}));  // recorded on the MPI worker's row
  const int64_t written = export_chrome_trace(path, group());
  EXPECT_FALSE(trace_enabled());
  // Every rank recorded its own span and its all-reduce.
  EXPECT_EQ(written, 2 * group().size());
  group().barrier();  // the file is complete once rank 0 has returned
  if (group().rank() != 0) return;
  std::ifstream file(path);
  const nlohmann::json events = nlohmann::json::parse(file)["traceEvents"];
  std::set<int> pids_with_work, pids_with_all_reduce;
  std::set<std::string> process_names;
  double earliest = 1e300;
  for (const auto& event : events) {
    if (event["name"] == "process_name") process_names.insert(event["args"]["name"].get<std::string>());
    if (event["ph"] != "X") continue;
    earliest = std::min(earliest, event["ts"].get<double>());
    const std::string name = event["name"];
    const int pid = event["pid"];
    if (name == "work of rank " + std::to_string(pid)) pids_with_work.insert(pid);
    if (name == "all_reduce 4 KiB" && event["cat"] == "comm") pids_with_all_reduce.insert(pid);
  }
  EXPECT_EQ(static_cast<int>(pids_with_work.size()), group().size());
  EXPECT_EQ(static_cast<int>(pids_with_all_reduce.size()), group().size());
  EXPECT_TRUE(process_names.count("rank " + std::to_string(group().size() - 1)));
  EXPECT_GE(earliest, 0.0);
  EXPECT_LT(earliest, 60e6) << "time zero is the earliest start of any rank";
  std::remove(path.c_str());
}
