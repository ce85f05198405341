#include "common/program.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "distributed/launch.h"
#include "util/regular_file.h"

namespace lockstep {

namespace {
// What is wrong with `text` as a whole number, or empty when nothing is (or when it is not a
// whole number at all). CLI11 converts a whole-number flag with strtoll (base 0) without looking
// at errno, so a number too large for 64 bits would reach the program clamped to 2^63 - 1, and
// "010" or "0x10" as 8 or 16. The text does not say the flag's type, so a real-valued flag keeps
// to the same rule: none of the chapters' needs a value above 9.2e18 written out in digits.
std::string whole_number_problem(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 0);
  if (text.empty() || *end != '\0') return "";
  if (errno == ERANGE) return "the largest whole number a flag takes is " + std::to_string(LLONG_MAX);
  if (std::strtoll(text.c_str(), &end, 10) != value || *end != '\0') {
    return "write whole numbers in decimal, without a leading 0 or 0x";
  }
  return "";
}

// A CLI11 validator accepting finite numbers from `min` to `max` (above `min` only, unless
// `min_included`); `wanted` says which in words, `name` is what help shows after the type. The
// text is checked before CLI11 converts it to the flag's type, so a whole-number flag given
// "1.5" passes here and is refused by the conversion ("Could not convert: --epochs = 1.5").
// strtod reads "inf", "nan" and "1e999" (as inf) too: an infinite learning rate would train to a
// loss of nan without a word, so only finite numbers pass.
CLI::Validator number_check(double min, bool min_included, double max, const std::string& wanted,
                            const std::string& name) {
  auto check = [=](std::string& text) -> std::string {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    const bool is_number = !text.empty() && *end == '\0';
    const std::string refusal = "expected " + wanted + ", got '" + text + "'";
    if (is_number && !std::isfinite(value)) return refusal + ": a flag takes finite numbers only";
    if (!is_number || value < min || (value == min && !min_included) || value > max) return refusal;
    const std::string problem = whole_number_problem(text);
    return problem.empty() ? "" : refusal + ": " + problem;
  };
  return CLI::Validator(check, name);
}

// `value` as help and messages show it: 0, 1, 1024 (no trailing zeros).
std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// The flags that answer each kind of library error, in the words of the chapters' common flags
// (--device, --backend, --batch-size, --data); empty where no flag helps.
std::string flag_advice(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::NoCudaDevice: return "use --device cpu";
    case ErrorKind::OutOfMemory: return "use a smaller --batch-size or model";
    case ErrorKind::NcclNeedsCuda: return "use --device cuda, or --backend mpi";
    case ErrorKind::NcclNeedsOneGpuPerRank: return "use --backend mpi, or fewer ranks";
    case ErrorKind::NcclNotBuilt: return "use --backend mpi";
    case ErrorKind::DataNotFound: return "use --data DIR to name the directory that holds them";
    case ErrorKind::CollectiveTimeout: return "use the same --collective-timeout on every rank";
    case ErrorKind::Other: break;
  }
  return "";
}
}  // namespace

CLI::Validator positive_number() {
  return number_check(0.0, /*min_included=*/false, HUGE_VAL, "a number above 0", "POSITIVE");
}

CLI::Validator non_negative_number() {
  return number_check(0.0, /*min_included=*/true, HUGE_VAL, "a number of 0 or more", "NONNEGATIVE");
}

CLI::Validator number_between(double min, double max) {
  const std::string from = number_text(min), to = number_text(max);
  return number_check(min, /*min_included=*/true, max, "a number from " + from + " to " + to,
                      "[" + from + ", " + to + "]");
}

CLI::Validator thread_count() { return number_between(0, kMaxThreads); }

void check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  LOCKSTEP_CHECK(folder.empty() || std::filesystem::is_directory(folder), flag, " ", path, ": the folder '",
                 folder.string(), "' does not exist");
  LOCKSTEP_CHECK(!std::filesystem::is_directory(path), flag, " ", path,
                 ": this is a folder; name a file to write, in it or elsewhere");
  // A device node, FIFO or socket is refused before it is opened: a FIFO's open would wait for
  // a reader, and a save would replace the node.
  const std::string kind = non_regular_kind(path);
  LOCKSTEP_CHECK(kind.empty(), flag, " ", path, ": this is ", kind, "; name a regular file to write");
  // Only trying tells: file permissions mean nothing to root, and a read-only mount or a file
  // system such as /sys refuses new files whatever they say. Opening for appending changes
  // nothing in a file that exists; one that did not is removed again. Through a symbolic link
  // that is the file it points to, which is the one the program writes.
  const std::string target = final_link_target(flag, path);
  std::error_code ignored;
  const bool existed = std::filesystem::exists(target, ignored);
  const int fd = open_regular_file(flag, target, O_WRONLY | O_CREAT | O_APPEND);
  LOCKSTEP_CHECK(fd >= 0, flag, " ", path, ": cannot write this file (", std::strerror(errno), ")");
  ::close(fd);
  if (!existed) std::remove(target.c_str());
}

void check_input_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const std::string kind = non_regular_kind(path);
  LOCKSTEP_CHECK(kind.empty(), flag, " ", path, ": this is ", kind, "; name a regular file to read");
  const int fd = open_regular_file(flag, path, O_RDONLY);
  LOCKSTEP_CHECK(fd >= 0, flag, " ", path, ": cannot read this file (", std::strerror(errno), ")");
  ::close(fd);
}

std::string error_message(const std::exception& error) {
  const auto* lockstep_error = dynamic_cast<const Error*>(&error);
  const std::string advice = lockstep_error != nullptr ? flag_advice(lockstep_error->kind()) : "";
  return advice.empty() ? error.what() : std::string(error.what()) + " (" + advice + ")";
}

int run_program(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is reported by CLI11 as a "parse error" with exit code 0.
    return app.exit(e);
  }
  try {
    return body();
  } catch (const std::exception& e) {
    // lockstep::Error carries our own sentences; anything else (out of memory, a file system
    // error) still ends with one line and a non-zero exit rather than an abort.
    // One write, so that the lines of ranks failing at once never interleave.
    std::cerr << app.get_name() + ": error: " + error_message(e) + "\n" << std::flush;
    // A rank that returned quietly would leave the job's other ranks waiting for it forever,
    // unless they all stopped on the same error.
    leave_job_after(e, 1);
    return 1;
  }
}

std::string ResultLine::str() const {
  std::string line = "RESULT";
  for (const std::string& field : fields_) line += " " + field;
  return line;
}

}  // namespace lockstep
