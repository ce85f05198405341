// The helpers of fuzz_input.h: a scratch folder per process, files written into it, and the
// property check that turns a wrong result into a crash the fuzzer records.
#include "fuzz_input.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

namespace lockstep::fuzz {

const std::string& scratch_folder() {
  // Never destroyed: the exit handler below reads it, and may run after static destructors.
  static const std::string* const folder = [] {
    std::string base = "/tmp";
    if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr && *tmpdir != '\0') base = tmpdir;
    std::error_code error;
    if (std::filesystem::is_directory("/dev/shm", error)) base = "/dev/shm";
    std::string pattern = base + "/lockstep-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror(("fuzz: cannot make a scratch folder " + pattern).c_str());
      std::abort();
    }
    // Removed when the process ends normally; a crash leaves it behind for inspection.
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_folder(), ignored);
    });
    return new std::string(pattern);
  }();
  return *folder;
}

std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_folder() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  require(out.good(), "could write the input to " + path);
  return path;
}

std::map<std::string, std::string> key_value_lines(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> values;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const size_t equals = line.find('=');
    if (equals != std::string::npos) values[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return values;
}

void require(bool holds, const std::string& what) {
  if (holds) return;
  std::cerr << "fuzz property failed: " << what << std::endl;
  std::abort();
}

}  // namespace lockstep::fuzz
