// util/regular_file.h: paths a user gives are opened only when they name a regular file. A FIFO
// is refused without blocking, a device, a socket and a folder are refused naming what they
// are, links are followed, and a regular file opens as with open() and fopen().
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.h"
#include "test_util.h"
#include "util/regular_file.h"

using namespace lockstep;
using lockstep::test::error_message;
namespace fs = std::filesystem;

namespace {

// Ends the test process if a call blocks for 20 s (a FIFO's open waiting for its other end),
// so that a regression fails instead of hanging the test run.
class HangGuard {
 public:
  HangGuard() { ::alarm(20); }
  ~HangGuard() { ::alarm(0); }
  HangGuard(const HangGuard&) = delete;
  HangGuard& operator=(const HangGuard&) = delete;
};

// Every test works in a fresh folder of its own, removed afterwards.
class RegularFile : public test::TempDirTest {
 protected:
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
};

// The text of the file open at `fd` from its start, closing it.
std::string read_and_close(int fd) {
  std::string text;
  char buffer[64];
  ssize_t got = 0;
  while ((got = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(got));
  ::close(fd);
  return text;
}

}  // namespace

TEST_F(RegularFile, ARegularFileOpensForReadingAndWriting) {
  const std::string path = write("data.bin", "abc");
  const int fd = open_regular_file("test", path, O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0) << "O_NONBLOCK must be cleared before the descriptor is returned";
  EXPECT_EQ(read_and_close(fd), "abc");

  const UniqueFile appended = fopen_regular_file("test", path, "ab");
  ASSERT_NE(appended, nullptr);
  EXPECT_GE(std::fputs("def", appended.get()), 0);
  EXPECT_EQ(std::fflush(appended.get()), 0);
  EXPECT_EQ(read_and_close(open_regular_file("test", path, O_RDONLY)), "abcdef");

  // "w" truncates, and creates a file that does not exist.
  ASSERT_NE(fopen_regular_file("test", path, "w"), nullptr);
  EXPECT_EQ(fs::file_size(path), 0u);
  ASSERT_NE(fopen_regular_file("test", file("new.bin"), "wb"), nullptr);
  EXPECT_TRUE(fs::is_regular_file(file("new.bin")));
}

TEST_F(RegularFile, ASymbolicLinkToARegularFileIsFollowed) {
  write("data.bin", "abc");
  fs::create_symlink("data.bin", file("link.bin"));
  EXPECT_EQ(non_regular_kind(file("link.bin")), "");
  const UniqueFile in = fopen_regular_file("test", file("link.bin"), "rb");
  ASSERT_NE(in, nullptr);
  char text[4] = {};
  EXPECT_EQ(std::fread(text, 1, 3, in.get()), 3u);
  EXPECT_STREQ(text, "abc");
}

TEST_F(RegularFile, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = make_fifo("pipe");
  const HangGuard guard;
  const std::string refusal = "load: '" + fifo + "' is a FIFO (named pipe); name a regular file";
  EXPECT_EQ(error_message([&] { open_regular_file("load", fifo, O_RDONLY); }), refusal);
  EXPECT_EQ(error_message([&] { fopen_regular_file("load", fifo, "rb"); }), refusal);
  EXPECT_EQ(error_message([&] { fopen_regular_file("--metrics", fifo, "w"); }),
            "--metrics: '" + fifo + "' is a FIFO (named pipe); name a regular file");
  // Through a link too, and the FIFO is still there, untouched.
  fs::create_symlink(fifo, file("link"));
  EXPECT_EQ(error_message([&] { fopen_regular_file("load", file("link"), "a"); }),
            "load: '" + file("link") + "' is a FIFO (named pipe); name a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(RegularFile, ADeviceIsRefusedAndLeftAsItIs) {
  const HangGuard guard;
  EXPECT_EQ(error_message([] { fopen_regular_file("save", "/dev/null", "wb"); }),
            "save: '/dev/null' is a character device; name a regular file");
  EXPECT_EQ(error_message([] { open_regular_file("read", "/dev/zero", O_RDONLY); }),
            "read: '/dev/zero' is a character device; name a regular file");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(RegularFile, AFolderIsRefused) {
  EXPECT_EQ(error_message([&] { open_regular_file("read_idx_images", dir(), O_RDONLY); }),
            "read_idx_images: '" + dir() + "' is a folder; name a file");
  EXPECT_EQ(non_regular_kind(dir()), "a folder");
}

TEST_F(RegularFile, ASocketIsRefused) {
  const std::string path = file("socket");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  EXPECT_EQ(error_message([&] { fopen_regular_file("trace", path, "w"); }),
            "trace: '" + path + "' is a socket; name a regular file");
  ::close(fd);
}

TEST_F(RegularFile, AMissingFileIsTheCallersToWord) {
  errno = 0;
  EXPECT_EQ(open_regular_file("test", file("missing"), O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(fopen_regular_file("test", file("no-folder/missing"), "w"), nullptr);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(non_regular_kind(file("missing")), "");
  check_regular_if_exists("test", file("missing"));  // a writer may create it
}

TEST_F(RegularFile, FinalLinkTargetFollowsEveryLinkRelativeToItsFolder) {
  fs::create_directories(file("a"));
  fs::create_directories(file("b"));
  write("b/real", "x");
  // a/first -> ../b/second (relative to a/, not to the working folder) -> real (relative to b/).
  fs::create_symlink("real", file("b/second"));
  fs::create_symlink("../b/second", file("a/first"));
  EXPECT_EQ(fs::canonical(final_link_target("test", file("a/first"))), fs::canonical(file("b/real")));
  // An absolute target, a dangling link (its target, which a writer creates) and no link at all.
  fs::create_symlink(file("b/real"), file("absolute"));
  EXPECT_EQ(final_link_target("test", file("absolute")), file("b/real"));
  fs::create_symlink("b/not-yet", file("dangling"));
  EXPECT_EQ(final_link_target("test", file("dangling")), file("b/not-yet"));
  EXPECT_EQ(final_link_target("test", file("b/real")), file("b/real"));
  EXPECT_EQ(final_link_target("test", "plain-name"), "plain-name");
}

TEST_F(RegularFile, ALoopOfLinksIsRefused) {
  fs::create_symlink("two", file("one"));
  fs::create_symlink("one", file("two"));
  EXPECT_EQ(error_message([&] { final_link_target("save_safetensors", file("one")); }),
            "save_safetensors: '" + file("one") +
                "' leads through more than 40 symbolic links (a loop of links?); name the file itself");
}
