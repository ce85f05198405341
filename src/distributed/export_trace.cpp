#include "distributed/export_trace.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "util/trace.h"

namespace lockstep {

int64_t export_chrome_trace(const std::string& path, ProcessGroup& group) {
  // The collectives below would be recorded too: stop here.
  disable_trace();
  // One time axis: zero is the earliest start of any rank (the largest of the negatives; a
  //    rank that never started a recording offers -infinity, which never wins).
  const double start = trace_start_us();
  const Tensor origin = from_vector({start > 0.0 ? -start : -std::numeric_limits<double>::infinity()}, {1},
                                    TensorOptions().dtype(DType::f64));
  group.all_reduce(origin, ReduceOp::Max);
  const std::string mine =
      trace_events_json(group.rank(), "rank " + std::to_string(group.rank()), -origin.item<double>());
  const Tensor spans = from_vector(std::vector<int64_t>{trace_span_count()}, {1});
  group.all_reduce(spans, ReduceOp::Sum);

  // Collectives move tensors of one size on every rank: pad each rank's text with spaces
  //    (which JSON ignores) to the longest, and gather them all as bytes.
  const Tensor longest = from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}, {1});
  group.all_reduce(longest, ReduceOp::Max);
  const int64_t width = longest.item<int64_t>();
  const Tensor padded = full({width}, ' ', TensorOptions().dtype(DType::u8));
  std::memcpy(padded.data(), mine.data(), mine.size());
  const Tensor everyone = empty({width * group.size()}, TensorOptions().dtype(DType::u8));
  group.all_gather(everyone, padded);

  // Rank 0 joins the pieces into one list of events and writes the file.
  if (group.rank() == 0) {
    const char* bytes = static_cast<const char*>(everyone.data());
    std::string events;
    for (int r = 0; r < group.size(); ++r) {
      if (r > 0) events += ",\n";
      events.append(bytes + r * width, static_cast<size_t>(width));
    }
    write_trace_file(path, events);
  }
  return spans.item<int64_t>();
}

}  // namespace lockstep
