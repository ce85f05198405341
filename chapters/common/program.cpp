#include "common/program.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "distributed/launch.h"

namespace lockstep {

namespace {
// A CLI11 validator accepting numbers above zero, or from zero on when `zero_allowed`. The text
// is checked before CLI11 converts it to the flag's type, so a whole-number flag given "1.5"
// passes here and is refused by the conversion ("Could not convert: --epochs = 1.5").
CLI::Validator number_check(bool zero_allowed) {
  const char* wanted = zero_allowed ? "a number of 0 or more" : "a number above 0";
  auto check = [zero_allowed, wanted](std::string& text) -> std::string {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    const bool is_number = !text.empty() && *end == '\0' && !std::isnan(value);
    if (is_number && (value > 0 || (zero_allowed && value == 0))) return "";
    return std::string("expected ") + wanted + ", got '" + text + "'";
  };
  return CLI::Validator(check, zero_allowed ? "NONNEGATIVE" : "POSITIVE");
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
    case ErrorKind::Other: break;
  }
  return "";
}
}  // namespace

CLI::Validator positive_number() { return number_check(/*zero_allowed=*/false); }

CLI::Validator non_negative_number() { return number_check(/*zero_allowed=*/true); }

void check_output_folder(const std::string& flag, const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  LOCKSTEP_CHECK(folder.empty() || std::filesystem::is_directory(folder), flag, " ", path, ": the folder '",
                 folder.string(), "' does not exist");
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
    std::cerr << app.get_name() << ": error: " << error_message(e) << "\n" << std::flush;
    // A rank that returned quietly would leave the job's other ranks waiting for it forever.
    abort_job(1);
    return 1;
  }
}

std::string ResultLine::str() const {
  std::string line = "RESULT";
  for (const std::string& field : fields_) line += " " + field;
  return line;
}

}  // namespace lockstep
