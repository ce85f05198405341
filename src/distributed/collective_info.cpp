#include "distributed/collective_info.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "util/fnv1a.h"
#include "util/trace.h"

namespace lockstep {

namespace {
// The names a fingerprint stores as small numbers, index 0 meaning "none".
constexpr const char* kOps[] = {"", "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
constexpr const char* kReductions[] = {"", "sum", "avg", "max"};

template <size_t N>
int32_t index_of(const char* const (&names)[N], const std::string& name) {
  const auto* found = std::find(std::begin(names), std::end(names), name);
  return found == std::end(names) ? 0 : static_cast<int32_t>(found - std::begin(names));
}

template <size_t N>
const char* name_at(const char* const (&names)[N], int32_t index) {
  return index >= 0 && static_cast<size_t>(index) < N ? names[index] : "?";
}

// The one wording both descriptions share.
std::string describe(uint64_t seq, const std::string& op, const std::string& reduce, const std::string& caller,
                     int root, int64_t numel, DType dtype, const std::string& size) {
  std::string text = "#" + std::to_string(seq) + " " + op;
  if (!reduce.empty()) text += " (" + reduce + ")";
  if (root >= 0) text += " from rank " + std::to_string(root);
  text += " of " + caller;
  if (op == "barrier") return text;
  return text + ": " + with_thousands(numel) + " " + dtype_name(dtype) + " elements" + size;
}
}  // namespace

std::string with_thousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return value < 0 ? "-" + digits : digits;
}

std::string CollectiveInfo::describe() const {
  return lockstep::describe(seq, op, reduce, caller, root, numel, dtype, ", " + bytes_str(bytes));
}

Fingerprint Fingerprint::of(const CollectiveInfo& info) {
  Fingerprint f;
  f.seq = info.seq;
  f.caller_hash = fnv1a(info.caller.data(), info.caller.size());
  f.numel = info.numel;
  f.op = index_of(kOps, info.op);
  f.reduce = index_of(kReductions, info.reduce);
  f.dtype = static_cast<int32_t>(info.dtype);
  f.root = info.root;
  // Always zero-terminated: at most sizeof(caller) - 1 characters of the name.
  std::strncpy(f.caller, info.caller.c_str(), sizeof(f.caller) - 1);
  return f;
}

bool Fingerprint::matches(const Fingerprint& other) const {
  return seq == other.seq && caller_hash == other.caller_hash && numel == other.numel && op == other.op &&
         reduce == other.reduce && dtype == other.dtype && root == other.root;
}

std::string Fingerprint::describe() const {
  const std::string name(caller, strnlen(caller, sizeof(caller)));
  return lockstep::describe(seq, name_at(kOps, op), name_at(kReductions, reduce), name, root, numel,
                            static_cast<DType>(dtype), "");
}

}  // namespace lockstep
