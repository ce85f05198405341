/// \file
/// Who started a collective: a name such as "DDP bucket 0" that the watchdog and the
/// fingerprint check print beside a collective's operation and size, so that a hang or a
/// mismatch points at the code that caused it rather than at an anonymous all_reduce.
///
/// The name belongs to the thread that starts collectives and lasts as long as a
/// CollectiveCaller object:
///
///     {
///       CollectiveCaller caller("DDP bucket " + std::to_string(i));
///       work = group.all_reduce_async(bucket);   // recorded as started by "DDP bucket 0"
///     }
///
/// Scopes nest; the innermost names the collective. Outside every scope the caller is
/// "user code".
#pragma once

#include <string>

namespace lockstep {

/// Names the collectives this thread starts while the object lives (see the file comment).
class CollectiveCaller {
 public:
  /// From now until destruction, collectives started on this thread are `name`'s.
  explicit CollectiveCaller(std::string name);
  /// Gives the name back to the enclosing scope's (or "user code").
  ~CollectiveCaller();
  CollectiveCaller(const CollectiveCaller&) = delete;             ///< One scope, one object.
  CollectiveCaller& operator=(const CollectiveCaller&) = delete;  ///< One scope, one object.

  /// The name of the innermost live scope of this thread, or "user code".
  static const std::string& current();

 private:
  std::string previous_;
};

}  // namespace lockstep
