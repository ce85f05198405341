// The chapters' checks of the paths their flags name, before any data is loaded:
// check_input_file (--load, --resume) and, for paths that are not regular files or are symbolic
// links, check_output_file (--save, --trace, --metrics, --checkpoint).
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/program.h"
#include "temp_dir.h"
#include "test_util.h"

using namespace lockstep;
using lockstep::test::error_message;
namespace fs = std::filesystem;

namespace {

// Every test works in a fresh folder of its own, removed afterwards. A call that blocks (a
// FIFO's open) ends the test run after 20 s instead of hanging it.
class ProgramFiles : public test::TempDirTest {
 protected:
  void SetUp() override { ::alarm(20); }
  void TearDown() override { ::alarm(0); }
};

std::string contents(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

}  // namespace

TEST_F(ProgramFiles, AnInputFileMustBeARegularFileThatCanBeRead) {
  std::ofstream(file("model.safetensors")) << "weights";
  check_input_file("--load", file("model.safetensors"));
  fs::create_symlink(file("model.safetensors"), file("link.safetensors"));
  check_input_file("--load", file("link.safetensors"));
  check_input_file("--resume", "");  // the flag not given

  const std::string fifo = make_fifo("pipe");
  EXPECT_EQ(error_message([&] { check_input_file("--load", fifo); }),
            "--load " + fifo + ": this is a FIFO (named pipe); name a regular file to read");
  EXPECT_EQ(error_message([&] { check_input_file("--resume", dir()); }),
            "--resume " + dir() + ": this is a folder; name a regular file to read");
  EXPECT_EQ(error_message([&] { check_input_file("--resume", file("missing.safetensors")); }),
            "--resume " + file("missing.safetensors") + ": cannot read this file (No such file or directory)");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(ProgramFiles, AnOutputThatIsNotARegularFileIsRefusedAndLeftAsItIs) {
  const std::string fifo = make_fifo("pipe");
  EXPECT_EQ(error_message([&] { check_output_file("--trace", fifo); }),
            "--trace " + fifo + ": this is a FIFO (named pipe); name a regular file to write");
  EXPECT_TRUE(fs::is_fifo(fifo));
  // A node like /dev/full of the test's own where the system lets it make one; else the
  // machine's, which the check only looks at.
  const bool made = ::mknod(file("full").c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0;
  const std::string full = made ? file("full") : "/dev/full";
  EXPECT_EQ(error_message([&] { check_output_file("--checkpoint", full); }),
            "--checkpoint " + full + ": this is a character device; name a regular file to write");
  EXPECT_TRUE(fs::is_character_file(full));
}

TEST_F(ProgramFiles, AnOutputThroughASymbolicLinkIsTriedOnTheFileItPointsTo) {
  fs::create_directories(file("runs"));
  // A dangling link: its target can be created, so the check passes; the file made for the try
  // is removed, and the link is left as it was.
  fs::create_symlink("runs/model.safetensors", file("latest.safetensors"));
  check_output_file("--save", file("latest.safetensors"));
  EXPECT_TRUE(fs::is_symlink(file("latest.safetensors")));
  EXPECT_FALSE(fs::exists(file("runs/model.safetensors")));
  // A link to an existing file: the file is tried, not changed.
  std::ofstream(file("runs/model.safetensors")) << "old";
  check_output_file("--save", file("latest.safetensors"));
  EXPECT_EQ(contents(file("runs/model.safetensors")), "old");
}
