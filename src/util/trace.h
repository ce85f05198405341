/// \file
/// A timeline of what every thread of the program did, saved in the Chrome trace-event format
/// that https://ui.perfetto.dev and chrome://tracing open (PyTorch: torch.profiler's
/// `record_function` and `export_chrome_trace`).
///
/// Tracing is off until a program calls enable_trace() (the chapters do when asked for a trace).
/// Then each RecordFunction adds one span, its name, start and duration, to the row of the
/// thread that made it (a name built at run time is built only then):
///
///     main        |-- forward --|------------- backward -------------|- step -|
///     MPI worker                                    |- all_reduce 879 KiB -|
///
/// which shows, for instance, whether DDP's all-reduce overlaps backward. Spans time the host:
/// for work queued on a GPU they show when it was queued, not when it ran, and NCCL's
/// collectives, which run on the GPU, have none. Times come from the
/// steady clock, which every process on one machine shares, so the spans of different ranks
/// line up (distributed/export_trace.h merges them into one file).
///
/// The same spans reach a SpanObserver whether tracing is on or not: DataParallel's phase times
/// are the sums of the spans that scatter, replicate, parallel_apply and gather open.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

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

/// Receives the spans of one category as they open and close, on the thread that makes them,
/// whether or not tracing is on (PyTorch's RecordFunction callbacks, on which its profiler is
/// built). It is how a timing layer sums the phases of an algorithm whose code only opens
/// spans: see observe_spans().
class SpanObserver {
 public:
  virtual ~SpanObserver() = default;
  /// Runs as a span opens and again as it closes, each time just before the span's clock is
  /// read: a profiler of GPU work waits for its devices here, so that the span times the work
  /// rather than its queueing. Does nothing by default.
  virtual void before_clock() {}
  /// A span named `name` closed, `seconds` after it opened.
  virtual void span_closed(const std::string& name, double seconds) = 0;
};

/// Sends every span of one category to one observer for as long as it lives (a scope, or a
/// member of the object that wants the times).
class SpanObservation {
 public:
  /// Starts sending the spans of `category` (a string literal, compared by its text) to
  /// `observer`, from every thread, until this is destroyed.
  SpanObservation(const char* category, std::shared_ptr<SpanObserver> observer);
  /// Stops sending; a span that is open at that moment may still reach the observer when it
  /// closes (the observer is kept alive until then).
  ~SpanObservation();
  SpanObservation(const SpanObservation&) = delete;             ///< One registration, one owner.
  SpanObservation& operator=(const SpanObservation&) = delete;  ///< One registration, one owner.

 private:
  std::shared_ptr<SpanObserver> observer_;
};

/// Times its own lifetime as one span (PyTorch's `with torch.profiler.record_function(name):`),
/// on the calling thread's row when tracing is on and to the observers of its category
/// (SpanObservation); when nobody records, it costs a check or two. Spans nest: one opened
/// inside another's lifetime is drawn beneath it. An empty name records nothing, which makes a
/// span conditional: `RecordFunction span(x ? "a" : "")`.
///
/// A name built at run time is built by a callable, called only when the span is recorded,
/// so that a program that records nothing pays nothing for it:
///
///     const RecordFunction span([&] { return name() + ".step"; }, "optim");
class RecordFunction {
 public:
  /// Opens a span named `name` in `category` ("step", "autograd", "comm", ...; both string
  /// literals, kept by pointer). The name is copied only when the span is recorded.
  explicit RecordFunction(const char* name, const char* category = "cpu");
  /// Opens a span in `category` named by `make_name()` (a callable returning std::string),
  /// which is called only when the span is recorded.
  template <class MakeName, class = std::enable_if_t<std::is_invocable_r_v<std::string, MakeName&>>>
  RecordFunction(MakeName make_name, const char* category) : category_(category) {
    if (wanted(category)) open(make_name());
  }
  /// Closes the span and records it (an observer's error is reported on stderr: a destructor
  /// does not throw).
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;             ///< A span is one scope.
  RecordFunction& operator=(const RecordFunction&) = delete;  ///< A span is one scope.

 private:
  // Whether a span of `category` opened now is recorded: tracing is on, or it is observed.
  static bool wanted(const char* category);
  // Starts the span named `name` (nothing for an empty name): takes its observers, lets them
  // wait, reads the clock.
  void open(std::string name);

  bool active_ = false;
  std::string name_;
  const char* category_;
  double start_us_ = 0.0;
  std::vector<std::shared_ptr<SpanObserver>> observers_;
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
/// trace file; throws lockstep::Error with the reason if the file cannot be written, or if
/// `path` is not a regular file (`trace: 'out' is a FIFO (named pipe); name a regular file`).
void write_trace_file(const std::string& path, const std::string& events);

/// Stops recording (disable_trace()) and writes this process's spans to `path` as one Chrome
/// trace named `process_name`, times counted from enable_trace(); returns how many spans it
/// wrote. For one process; a job of several ranks uses export_chrome_trace().
int64_t save_trace(const std::string& path, const std::string& process_name);

}  // namespace lockstep
