// A folder of its own for a test's files: made fresh for each test and removed after it with
// everything in it, so that tests never see each other's files or leave theirs behind.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <string>
#include <system_error>

namespace lockstep::test {

/// A new, empty folder under the system's temporary folder, named `lockstep_<what>_XXXXXX` by
/// mkdtemp (a name no other process has), removed with its contents by the destructor.
class TempDir {
 public:
  /// Creates the folder; a std::filesystem::filesystem_error if the system refuses.
  explicit TempDir(const std::string& what = "test") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("lockstep_" + what + "_XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::filesystem::filesystem_error("cannot make a temporary folder", pattern,
                                              std::error_code(errno, std::generic_category()));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The folder's path.
  const std::string& path() const { return path_; }
  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

/// A fixture whose tests each get a fresh TempDir: dir() is its path, file(name) a path in it.
class TempDirTest : public ::testing::Test {
 protected:
  /// The test's folder.
  const std::string& dir() const { return temp_.path(); }
  /// The path of `name` inside the test's folder.
  std::string file(const std::string& name) const { return temp_.file(name); }
  /// Makes a FIFO (a named pipe) `name` in the test's folder and returns its path: a path that
  /// blocks whoever opens it for reading until a writer comes.
  std::string make_fifo(const std::string& name) const {
    EXPECT_EQ(::mkfifo(file(name).c_str(), 0600), 0) << std::strerror(errno);
    return file(name);
  }

 private:
  TempDir temp_;
};

}  // namespace lockstep::test
