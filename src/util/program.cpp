#include "util/program.h"

#include <filesystem>
#include <iostream>
#include <utility>

#include "core/error.h"

namespace lockstep {

namespace {
std::function<void(int)>& fatal_error_handler() {
  static std::function<void(int)> handler;
  return handler;
}
}  // namespace

void check_output_folder(const std::string& flag, const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  LOCKSTEP_CHECK(folder.empty() || std::filesystem::is_directory(folder), flag, " ", path, ": the folder '",
                 folder.string(), "' does not exist");
}

void set_fatal_error_handler(std::function<void(int exit_code)> handler) { fatal_error_handler() = std::move(handler); }

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
    std::cerr << app.get_name() << ": error: " << e.what() << "\n" << std::flush;
    if (fatal_error_handler()) fatal_error_handler()(1);
    return 1;
  }
}

std::string ResultLine::str() const {
  std::string line = "RESULT";
  for (const std::string& field : fields_) line += " " + field;
  return line;
}

}  // namespace lockstep
