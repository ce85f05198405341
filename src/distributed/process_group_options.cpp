#include "distributed/process_group_options.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace lockstep {

namespace {
// A deadline is a duration: NaN, inf and negative numbers are mistakes, not "forever".
void check_timeout(double seconds, const std::string& source) {
  LOCKSTEP_CHECK(std::isfinite(seconds) && seconds >= 0.0, source,
                 ": expected a collective timeout in seconds, finite and >= 0 (0 turns the watchdog off), got ",
                 seconds);
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}
}  // namespace

ProcessGroupOptions& ProcessGroupOptions::timeout(double seconds) {
  check_timeout(seconds, "ProcessGroupOptions::timeout");
  timeout_ = seconds;
  return *this;
}

double ProcessGroupOptions::resolved_timeout(const std::function<const char*(const char*)>& getenv) const {
  if (timeout_) return *timeout_;
  const char* text = getenv("LOCKSTEP_COLLECTIVE_TIMEOUT");
  if (text == nullptr || *text == '\0') return kDefaultTimeout;
  // The whole value must be a decimal number: "10s" or "ten" is refused rather than read as 10
  // or 0, and " 5" or "0x10" (which strtod would take as 5 and 16) as the command-line flags are.
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  const bool decimal = !std::isspace(static_cast<unsigned char>(text[0])) && std::strpbrk(text, "xX") == nullptr;
  LOCKSTEP_CHECK(end != text && *end == '\0' && decimal,
                 "$LOCKSTEP_COLLECTIVE_TIMEOUT: expected a number of seconds, got \"", text, "\"");
  check_timeout(seconds, "$LOCKSTEP_COLLECTIVE_TIMEOUT");
  return seconds;
}

DistributedDebug ProcessGroupOptions::resolved_debug(const std::function<const char*(const char*)>& getenv) const {
  if (debug_) return *debug_;
  const char* text = getenv("LOCKSTEP_DISTRIBUTED_DEBUG");
  if (text == nullptr || *text == '\0') return DistributedDebug::off;
  const std::string level = upper(text);
  if (level == "OFF") return DistributedDebug::off;
  if (level == "DETAIL") return DistributedDebug::detail;
  LOCKSTEP_FAIL("$LOCKSTEP_DISTRIBUTED_DEBUG: expected OFF or DETAIL, got \"", text, "\"");
}

double ProcessGroupOptions::resolved_timeout() const {
  return resolved_timeout([](const char* name) { return std::getenv(name); });
}

DistributedDebug ProcessGroupOptions::resolved_debug() const {
  return resolved_debug([](const char* name) { return std::getenv(name); });
}

const char* distributed_debug_name(DistributedDebug level) { return level == DistributedDebug::detail ? "DETAIL" : "OFF"; }

}  // namespace lockstep
