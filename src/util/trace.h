/// \file
/// A timeline of what every thread of the program did, saved in the Chrome trace-event format
/// that https://ui.perfetto.dev and chrome://tracing open (PyTorch: torch.profiler's
/// `record_function` and `export_chrome_trace`).
///
/// Tracing is off until a program calls enable_trace() (chapter 4 does for `--trace FILE`).
/// Then each RecordFunction adds one span, its name, start and duration, to the row of the
/// thread that made it:
///
///     main        |-- forward --|------------- backward -------------|- step -|
///     MPI worker                                    |- all_reduce 879 KiB -|
///
/// which shows, for instance, whether DDP's all-reduce overlaps backward. Spans time the host:
/// for work queued on a GPU they show when it was queued, not when it ran, and NCCL's
/// collectives, which run on the GPU, have none. Times come from the
/// steady clock, which every process on one machine shares, so the spans of different ranks
/// line up (distributed/export_trace.h merges them into one file).
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

/// Starts recording spans, forgetting any recorded before. Spans already open when it is called
/// are not recorded.
void enable_trace();
/// Stops recording; what was recorded stays until the next enable_trace().
void disable_trace();
/// Whether spans are being recorded.
bool trace_enabled();
/// Names the calling thread's row of the timeline ("main", "MPI worker"); rows without a
/// name are called "thread N". Threads of one name that ran one after another (each epoch's
/// DataLoader worker) are drawn on one row; those running at the same time on rows of their own.
void set_trace_thread_name(const std::string& name);
/// Microseconds on the clock the spans are timed with (steady, shared by the processes of one
/// machine).
double trace_clock_us();
/// When enable_trace() was last called, on trace_clock_us()'s clock (0 if it never was).
double trace_start_us();

/// Times its own lifetime as one span on the calling thread's row when tracing is on
/// (PyTorch's `with torch.profiler.record_function(name):`); when it is off it costs a check and
/// copies nothing. Spans nest: one opened inside another's lifetime is drawn beneath it. An
/// empty name records nothing, which makes a span conditional: `RecordFunction span(x ? "a" : "")`.
class RecordFunction {
 public:
  /// Opens a span named `name` in `category` ("step", "autograd", "comm", ...; a string literal,
  /// kept by pointer). The name is copied only when tracing is on.
  explicit RecordFunction(const char* name, const char* category = "cpu");
  /// The same for a name built at run time; build it only when trace_enabled(), and pass ""
  /// otherwise: `RecordFunction span(trace_enabled() ? name() + ".step" : "", "optim")`.
  RecordFunction(std::string name, const char* category);
  /// Closes the span and records it.
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;             ///< A span is one scope.
  RecordFunction& operator=(const RecordFunction&) = delete;  ///< A span is one scope.

 private:
  bool active_;
  std::string name_;
  const char* category_;
  double start_us_ = 0.0;
};

/// A size for a span's name: "512 B", "879 KiB", "16 MiB" (rounded to whole units, and to the
/// larger unit when rounding reaches 1024).
std::string bytes_str(int64_t bytes);

/// How many spans have been recorded since the last enable_trace().
int64_t trace_span_count();

/// The spans recorded so far as trace events: JSON objects separated by commas, without the
/// surrounding array, with process id `pid` (the rank), and times in microseconds after
/// `origin_us` (a trace_clock_us() value). Includes `process_name` and the names of the rows
/// that have spans.
std::string trace_events_json(int pid, const std::string& process_name, double origin_us);

/// Writes `events` (trace_events_json() of one process, or several joined with commas) as a
/// trace file; throws lockstep::Error with the reason if the file cannot be written.
void write_trace_file(const std::string& path, const std::string& events);

/// Stops recording (disable_trace()) and writes this process's spans to `path` as one Chrome
/// trace named `process_name`, times counted from enable_trace(); returns how many spans it
/// wrote. For one process; a job of several ranks uses export_chrome_trace().
int64_t save_trace(const std::string& path, const std::string& process_name);

}  // namespace lockstep
