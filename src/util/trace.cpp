#include "util/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/error.h"
#include "util/regular_file.h"

namespace lockstep {

namespace {

// One closed span.
struct Span {
  std::string name;
  std::string category;
  double start_us;
  double duration_us;
  int row;
};

// Everything recorded, behind one lock: spans are few (tens per training step), so a shared
// list costs less than it would take to explain per-thread buffers.
struct Recording {
  std::atomic<bool> enabled{false};
  std::mutex mutex;
  double start_us = 0.0;
  std::vector<Span> spans;
  std::map<int, std::string> row_names;
};

Recording& recording() {
  static Recording r;
  return r;
}

// Who observes spans, by category. `count` lets a span that nobody observes skip the lock.
struct Observers {
  std::atomic<int> count{0};
  std::mutex mutex;
  std::vector<std::pair<const char*, std::shared_ptr<SpanObserver>>> list;
};

Observers& observers() {
  static Observers o;
  return o;
}

// Whether any observer wants spans of `category`.
bool observed(const char* category) {
  Observers& o = observers();
  if (o.count.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(o.mutex);
  for (const auto& [observed_category, observer] : o.list) {
    if (std::strcmp(observed_category, category) == 0) return true;
  }
  return false;
}

// The observers of `category` now, kept by the span until it closes.
std::vector<std::shared_ptr<SpanObserver>> observers_of(const char* category) {
  std::vector<std::shared_ptr<SpanObserver>> found;
  Observers& o = observers();
  if (o.count.load(std::memory_order_relaxed) == 0) return found;
  std::lock_guard<std::mutex> lock(o.mutex);
  for (const auto& [observed_category, observer] : o.list) {
    if (std::strcmp(observed_category, category) == 0) found.push_back(observer);
  }
  return found;
}

// The calling thread's row: 0 for the main thread (on Linux the thread whose id is the
// process id), then 1, 2, ... in order of first use.
int this_row() {
  static std::atomic<int> next_row{1};
  thread_local const int row = syscall(SYS_gettid) == getpid() ? 0 : next_row++;
  return row;
}

}  // namespace

double trace_clock_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void enable_trace() {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.spans.clear();
  r.start_us = trace_clock_us();
  r.enabled = true;
}

void disable_trace() {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.enabled = false;
}

bool trace_enabled() { return recording().enabled.load(std::memory_order_relaxed); }

double trace_start_us() {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.start_us;
}

void set_trace_thread_name(const std::string& name) {
  Recording& r = recording();
  const int row = this_row();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.row_names[row] = name;
}

SpanObservation::SpanObservation(const char* category, std::shared_ptr<SpanObserver> observer)
    : observer_(std::move(observer)) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lock(o.mutex);
  o.list.emplace_back(category, observer_);
  o.count = static_cast<int>(o.list.size());
}

SpanObservation::~SpanObservation() {
  Observers& o = observers();
  std::lock_guard<std::mutex> lock(o.mutex);
  for (auto it = o.list.begin(); it != o.list.end(); ++it) {
    if (it->second == observer_) {
      o.list.erase(it);
      break;
    }
  }
  o.count = static_cast<int>(o.list.size());
}

bool RecordFunction::wanted(const char* category) {
  return trace_enabled() || observed(category);
}

RecordFunction::RecordFunction(const char* name, const char* category) : category_(category) {
  if (wanted(category)) open(name);
}

void RecordFunction::open(std::string name) {
  if (name.empty()) return;
  active_ = true;
  name_ = std::move(name);
  observers_ = observers_of(category_);
  // The observers settle first (a profiler waits for its GPUs), so that the clock starts after.
  for (const auto& observer : observers_) observer->before_clock();
  start_us_ = trace_clock_us();
}

RecordFunction::~RecordFunction() {
  if (!active_) return;
  double end_us = 0.0;
  // A destructor must not throw (it may run while an exception unwinds the stack): an
  // observer that fails, a profiler whose GPU wait reports an error, says so on stderr.
  try {
    for (const auto& observer : observers_) observer->before_clock();
    end_us = trace_clock_us();
    for (const auto& observer : observers_) observer->span_closed(name_, (end_us - start_us_) * 1e-6);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "trace: an observer of the span '%s' failed: %s\n", name_.c_str(), error.what());
    end_us = trace_clock_us();
  }
  if (!trace_enabled()) return;
  Recording& r = recording();
  const int row = this_row();
  std::lock_guard<std::mutex> lock(r.mutex);
  // Checked again under the lock: after disable_trace() nothing is added. And a span opened
  // before the last enable_trace() belongs to a recording that was thrown away.
  if (!r.enabled || start_us_ < r.start_us) return;
  r.spans.push_back({std::move(name_), category_, start_us_, end_us - start_us_, row});
}

std::string bytes_str(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const int64_t kib = (bytes + 512) >> 10;
  if (kib < 1024) return std::to_string(kib) + " KiB";
  return std::to_string((bytes + (int64_t(1) << 19)) >> 20) + " MiB";
}

int64_t trace_span_count() {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  return static_cast<int64_t>(r.spans.size());
}

std::string trace_events_json(int pid, const std::string& process_name, double origin_us) {
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string out;
  auto append = [&](const nlohmann::json& event) {
    if (!out.empty()) out += ",\n";
    out += event.dump();
  };
  // Metadata ("ph": "M") names the process and its rows, and keeps the rows in order.
  append({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", process_name}}}});
  // Only rows with spans: a thread named in an earlier recording may have done nothing in this
  // one. Each row's name, and the time from its first span's start to its last span's end.
  struct Row {
    std::string name;
    double first_us, last_us;
  };
  std::map<int, Row> rows;
  for (const Span& span : r.spans) {
    const auto named = r.row_names.find(span.row);
    const std::string name = named != r.row_names.end() ? named->second
                             : span.row == 0          ? "main"
                                                      : "thread " + std::to_string(span.row);
    auto [it, added] = rows.emplace(span.row, Row{name, span.start_us, span.start_us + span.duration_us});
    it->second.first_us = std::min(it->second.first_us, span.start_us);
    it->second.last_us = std::max(it->second.last_us, span.start_us + span.duration_us);
  }
  // Threads of one name that ran one after another (each epoch's DataLoader worker) share the
  // first one's row, so that the timeline has one "DataLoader worker" row, not one per epoch.
  // Rows whose times overlap stay apart: spans on one row must nest.
  std::map<int, int> drawn_on;  // row -> the row it is drawn on
  std::map<int, Row> drawn;     // drawn rows, with the time their spans cover so far
  for (const auto& [row, info] : rows) {
    int target = row;
    for (auto& [earlier, covered] : drawn) {
      if (covered.name == info.name && covered.last_us <= info.first_us) {
        target = earlier;
        covered.last_us = info.last_us;
        break;
      }
    }
    if (target == row) drawn.emplace(row, info);
    drawn_on[row] = target;
  }
  for (const auto& [row, info] : drawn) {
    append({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", row}, {"args", {{"name", info.name}}}});
    append({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", row}, {"args", {{"sort_index", row}}}});
  }
  // Each span is a "complete" event ("ph": "X"): a start and a duration, in microseconds.
  for (const Span& span : r.spans) {
    append({{"name", span.name}, {"cat", span.category}, {"ph", "X"}, {"pid", pid}, {"tid", drawn_on[span.row]},
            {"ts", span.start_us - origin_us}, {"dur", span.duration_us}});
  }
  return out;
}

void write_trace_file(const std::string& path, const std::string& events) {
  UniqueFile file = fopen_regular_file("trace", path, "wb");
  LOCKSTEP_CHECK(file != nullptr, "trace: cannot open '", path, "' for writing (", std::strerror(errno), ")");
  const std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n" + events + "\n]}\n";
  const bool written = std::fwrite(text.data(), 1, text.size(), file.get()) == text.size();
  const bool closed = std::fclose(file.release()) == 0;  // what the buffer still held is written here
  LOCKSTEP_CHECK(written && closed, "trace: writing '", path, "' failed (is the disk full?)");
}

int64_t save_trace(const std::string& path, const std::string& process_name) {
  disable_trace();
  write_trace_file(path, trace_events_json(0, process_name, trace_start_us()));
  return trace_span_count();
}

}  // namespace lockstep
