/// \file
/// What one collective is, as the watchdog and the fingerprint check describe it: its sequence
/// number on the group, its operation, dtype, element count and caller. A Fingerprint is the
/// same facts in a fixed 128-byte record that ranks can all-gather and compare.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace lockstep {

/// A collective as this rank started it.
struct CollectiveInfo {
  uint64_t seq = 0;             ///< 1, 2, ...: its position among the group's collectives on this rank
  std::string op;               ///< "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"
  std::string reduce;           ///< "sum", "avg", "max", or empty where the operation does not reduce
  DType dtype = DType::u8;      ///< the dtype of the data sent
  int64_t numel = 0;            ///< the elements this rank sends (for all_gather: its own slice)
  int64_t bytes = 0;            ///< the bytes of the tensor it writes (what a trace shows)
  int root = -1;                ///< the root of a broadcast, else -1
  std::string caller;           ///< CollectiveCaller's name when it started ("DDP bucket 0")

  /// "#57 all_reduce (sum) of DDP bucket 0: 224,800 f32 elements, 879 KiB".
  std::string describe() const;
};

/// A collective's facts in a form every rank can send and compare byte for byte.
struct Fingerprint {
  uint64_t seq = 0;          ///< CollectiveInfo::seq
  uint64_t caller_hash = 0;  ///< FNV-1a of the full caller name
  int64_t numel = 0;         ///< CollectiveInfo::numel
  int32_t op = 0;            ///< the operation, as an index into a fixed list
  int32_t reduce = 0;        ///< the reduction, likewise (0: none)
  int32_t dtype = 0;         ///< the DType's value
  int32_t root = -1;         ///< CollectiveInfo::root
  char caller[88] = {};      ///< the caller's name, cut to fit, for the message

  /// The fingerprint of `info`.
  static Fingerprint of(const CollectiveInfo& info);
  /// Whether two ranks calling collectives with these fingerprints are calling the same one
  /// (every field but the shortened name).
  bool matches(const Fingerprint& other) const;
  /// Like CollectiveInfo::describe, from the record alone.
  std::string describe() const;
};
static_assert(sizeof(Fingerprint) == 128, "a Fingerprint is one fixed-size record on every rank");

/// 224800 -> "224,800".
std::string with_thousands(int64_t value);

}  // namespace lockstep
