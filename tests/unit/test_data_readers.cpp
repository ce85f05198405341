// Dataset readers: IDX (plain and gzip), Fashion-MNIST and the data directory lookup, CIFAR-10
// binary batches, image folders. Every test writes its own tiny files into a temporary folder.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "data/cifar10.h"
#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "lockstep.h"
#include "temp_dir.h"
#include "test_util.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

using namespace lockstep;
using namespace lockstep::test;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

void write_file(const std::string& path, const Bytes& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(file);
}

// An IDX file: the magic, one big-endian uint32 per dimension, then `data`.
Bytes idx(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes out;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes iota_bytes(size_t n, uint8_t start = 0) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(start + i);
  return out;
}

// Writes a Fashion-MNIST pair of files named `prefix`-{images-idx3,labels-idx1}-ubyte[.gz].
void write_fashion(const TempDir& dir, const std::string& prefix, const Bytes& pixels, const Bytes& labels,
                   bool gzip) {
  const uint32_t n_images = static_cast<uint32_t>(pixels.size() / (28 * 28));
  const Bytes images = idx(0x803, {n_images, 28, 28}, pixels);
  const Bytes label_file = idx(0x801, {static_cast<uint32_t>(labels.size())}, labels);
  if (gzip) {
    write_gzip(dir.file(prefix + "-images-idx3-ubyte.gz"), images);
    write_gzip(dir.file(prefix + "-labels-idx1-ubyte.gz"), label_file);
  } else {
    write_file(dir.file(prefix + "-images-idx3-ubyte"), images);
    write_file(dir.file(prefix + "-labels-idx1-ubyte"), label_file);
  }
}

// Sets or clears an environment variable for the lifetime of the guard, then restores it.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvGuard() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// IDX

TEST(Idx, ReadsPlainImagesAndLabels) {
  TempDir dir;
  write_file(dir.file("images"), idx(0x803, {2, 2, 3}, iota_bytes(12, 100)));
  write_file(dir.file("labels"), idx(0x801, {3}, {7, 0, 255}));

  const Tensor images = read_idx_images(dir.file("images"));
  EXPECT_EQ(images.dtype(), DType::u8);
  EXPECT_EQ(images.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(images.to_vector<int>(), (std::vector<int>{100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111}));
  EXPECT_EQ(images[1][0][2].item<int>(), 108);  // image 1, row 0, column 2: row-major

  const Tensor labels = read_idx_labels(dir.file("labels"));
  EXPECT_EQ(labels.shape(), (Shape{3}));
  EXPECT_EQ(labels.to_vector<int>(), (std::vector<int>{7, 0, 255}));
}

TEST(Idx, ReadsGzipCompressedFiles) {
  TempDir dir;
  const Bytes pixels = iota_bytes(3 * 4 * 5, 1);
  write_gzip(dir.file("images.gz"), idx(0x803, {3, 4, 5}, pixels));
  // The file really is compressed: it starts with the gzip magic 1f 8b.
  std::ifstream raw(dir.file("images.gz"), std::ios::binary);
  ASSERT_EQ(raw.get(), 0x1f);
  ASSERT_EQ(raw.get(), 0x8b);

  const Tensor images = read_idx_images(dir.file("images.gz"));
  EXPECT_EQ(images.shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(images.to_vector<uint8_t>(), pixels);
}

TEST(Idx, RejectsBadMagicNumbers) {
  TempDir dir;
  write_file(dir.file("four"), idx(0x804, {1, 1, 1, 1}, {0}));
  expect_error([&] { read_idx_images(dir.file("four")); },
               dir.file("four") + ": bad magic number 0x00000804 (expected 0x00000803 for images)");
  // Not IDX at all (a text file): the type byte is not 0x08.
  write_file(dir.file("text"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!'});
  expect_error([&] { read_idx_labels(dir.file("text")); }, "bad magic number 0x68656c6c (expected 0x00000801 for labels)");
  expect_error([&] { read_idx_labels(dir.file("text")); }, "not an IDX file of unsigned bytes");
}

TEST(Idx, RejectsTheWrongRank) {
  TempDir dir;
  write_file(dir.file("images"), idx(0x803, {1, 2, 2}, {1, 2, 3, 4}));
  write_file(dir.file("labels"), idx(0x801, {4}, {1, 2, 3, 4}));
  expect_error([&] { read_idx_labels(dir.file("images")); }, "the file has 3 dimensions but labels have 1");
  expect_error([&] { read_idx_images(dir.file("labels")); }, "the file has 1 dimensions but images have 3");
}

TEST(Idx, RejectsTruncatedFiles) {
  TempDir dir;
  // The header promises 3 images of 28x28 (2352 bytes) but only 10 follow.
  write_file(dir.file("short"), idx(0x803, {3, 28, 28}, iota_bytes(10)));
  expect_error([&] { read_idx_images(dir.file("short")); },
               dir.file("short") + ": truncated: header says 3 images of 28x28 but the file holds 10 bytes of pixel data");
  write_gzip(dir.file("short.gz"), idx(0x801, {5}, {1, 2}));
  expect_error([&] { read_idx_labels(dir.file("short.gz")); },
               "truncated: header says 5 labels but the file holds 2 bytes of label data");
  // The header itself is cut: the magic and one of three sizes.
  write_file(dir.file("header"), idx(0x803, {3}, {}));
  expect_error([&] { read_idx_images(dir.file("header")); }, "truncated: the header needs 16 bytes but the file holds 8");
  write_file(dir.file("empty"), {});
  expect_error([&] { read_idx_images(dir.file("empty")); }, dir.file("empty") + ": truncated: the file holds 0 bytes");
  // A header at the limit of 2^31 bytes is believed only as far as the file goes: the error
  // comes from the data that is there, without 2 GiB set aside for it first.
  write_file(dir.file("limit"), idx(0x803, {2048, 1024, 1024}, iota_bytes(5)));
  expect_error([&] { read_idx_images(dir.file("limit")); },
               "truncated: header says 2048 images of 1024x1024 but the file holds 5 bytes of pixel data");
}

TEST(Idx, RefusesAbsurdHeaderSizesBeforeReadingTheData) {
  TempDir dir;
  // Sizes whose product overflows 64 bits (2^22 * 2^22 * 2^20 = 2^64 wraps to 0) must not pass
  // for a file with no pixel data at all.
  write_file(dir.file("huge"), idx(0x803, {1u << 22, 1u << 22, 1u << 20}, {}));
  expect_error([&] { read_idx_images(dir.file("huge")); },
               dir.file("huge") + ": header says 4194304 images of 4194304x1048576, more than the 2147483648 bytes of "
                              "pixel data an IDX file may hold; it is corrupt or not an IDX file of images");
  // No overflow, but 4.7 GB: refused by the cap, whatever follows the header.
  write_gzip(dir.file("big.gz"), idx(0x803, {60000, 280, 280}, Bytes(100, 0)));
  expect_error([&] { read_idx_images(dir.file("big.gz")); },
               "header says 60000 images of 280x280, more than the 2147483648 bytes of pixel data");
  write_file(dir.file("labels"), idx(0x801, {0xffffffffu}, {}));
  expect_error([&] { read_idx_labels(dir.file("labels")); }, "header says 4294967295 labels, more than the 2147483648");
}

// A gzip bomb: a header for 10 images of 28x28, then 100 MB of zeros that deflate to under half a
// megabyte. Reading must stop one byte past the 7840 bytes the header declares, instead of
// inflating everything and comparing afterwards.
TEST(Idx, StopsInflatingAtTheSizeTheHeaderDeclares) {
  TempDir dir;
  z_stream stream{};
  ASSERT_EQ(deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // +16: gzip
  Bytes compressed(1 << 20);
  size_t used = 0;
  // Compresses `input` (or finishes the stream), growing `compressed` as needed.
  const auto feed = [&](const Bytes& input, int flush) {
    stream.next_in = const_cast<Bytef*>(input.data());
    stream.avail_in = static_cast<uInt>(input.size());
    int result = Z_OK;
    do {
      if (compressed.size() - used < (1 << 16)) compressed.resize(compressed.size() * 2);
      stream.next_out = compressed.data() + used;
      stream.avail_out = static_cast<uInt>(compressed.size() - used);
      result = deflate(&stream, flush);
      used = compressed.size() - stream.avail_out;
    } while (stream.avail_in > 0 || (flush == Z_FINISH && result != Z_STREAM_END));
  };
  feed(idx(0x803, {10, 28, 28}, {}), Z_NO_FLUSH);
  const Bytes zeros(1 << 20, 0);
  for (int mib = 0; mib < 100; ++mib) feed(zeros, Z_NO_FLUSH);
  feed({}, Z_FINISH);
  deflateEnd(&stream);
  compressed.resize(used);
  ASSERT_LT(compressed.size(), 1u << 20);
  write_file(dir.file("bomb.gz"), compressed);

  expect_error([&] { read_idx_images(dir.file("bomb.gz")); },
               dir.file("bomb.gz") + ": header says 10 images of 28x28 (7840 bytes of pixel data) but the file holds "
                                 "more (reading stopped at 7841 bytes); it is corrupt or not an IDX file of images");
}

TEST(Idx, RejectsCutOrCorruptGzipStreams) {
  TempDir dir;
  write_gzip(dir.file("full.gz"), idx(0x803, {4, 28, 28}, iota_bytes(4 * 28 * 28)));
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  const Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Cut in half: zlib runs out of input in the middle of the stream.
  write_file(dir.file("cut.gz"), Bytes(bytes.begin(), bytes.begin() + bytes.size() / 2));
  expect_error([&] { read_idx_images(dir.file("cut.gz")); }, dir.file("cut.gz") + ": truncated: the gzip stream ends early");
  // One flipped byte in the stored CRC-32 at the end (the 8 bytes before the file's end hold
  // the CRC and the length).
  Bytes corrupt = bytes;
  corrupt[corrupt.size() - 8] ^= 0xff;
  write_file(dir.file("corrupt.gz"), corrupt);
  expect_error([&] { read_idx_images(dir.file("corrupt.gz")); }, dir.file("corrupt.gz") + ": corrupt gzip data (incorrect data check)");
}

TEST(Idx, RejectsExtraBytesAfterTheData) {
  TempDir dir;
  write_file(dir.file("long"), idx(0x801, {2}, {1, 2, 3}));
  expect_error([&] { read_idx_labels(dir.file("long")); },
               "header says 2 labels (2 bytes of label data) but the file holds more (reading stopped at 3 bytes)");
}

TEST(Idx, RejectsMissingFilesAndEmptyPaths) {
  TempDir dir;
  expect_error([&] { read_idx_images(dir.file("nope")); }, dir.file("nope") + ": cannot open (No such file or directory)");
  expect_error([&] { read_idx_labels(""); }, "(empty path): cannot open: no file name was given");
  expect_error([&] { read_idx_labels(dir.path()); }, "read_idx_labels: '" + dir.path() + "' is a folder; name a file");
}

// A FIFO's open waits for a writer that never comes: every reader refuses it at once, naming
// itself and the FIFO (the alarm ends a test run that blocks instead of letting it hang).
TEST(Idx, RefusesAFifoWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir.file("pipe")).c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((dir.file("test_batch.bin")).c_str(), 0600), 0);
  ::alarm(20);
  expect_error([&] { read_idx_images(dir.file("pipe")); },
               "read_idx_images: '" + dir.file("pipe") + "' is a FIFO (named pipe); name a regular file");
  expect_error([&] { cifar10(dir.path(), false, 1); },
               "cifar10: '" + dir.file("test_batch.bin") + "' is a FIFO (named pipe); name a regular file");
  ::alarm(0);
}

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST

TEST(FashionMnist, LoadsAndNormalisesLikeTorchvision) {
  TempDir dir;
  // Three images: all 0, all 255, and one of 51 (0.2 after scaling) with a single 128.
  Bytes pixels(3 * 784, 0);
  std::fill(pixels.begin() + 784, pixels.begin() + 2 * 784, 255);
  std::fill(pixels.begin() + 2 * 784, pixels.end(), 51);
  pixels[2 * 784 + 28 * 5 + 7] = 128;  // image 2, row 5, column 7
  write_fashion(dir, "train", pixels, {9, 0, 4}, /*gzip=*/true);
  write_fashion(dir, "t10k", Bytes(784, 255), {3}, /*gzip=*/false);

  const TensorDataset train = fashion_mnist(dir.path(), true);
  EXPECT_EQ(train.size(), 3);
  EXPECT_EQ(train.inputs().shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(train.inputs().dtype(), DType::f32);
  EXPECT_EQ(train.targets().dtype(), DType::i64);
  EXPECT_EQ(train.targets().to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 4}));
  EXPECT_EQ(train.num_classes(), 10);
  EXPECT_EQ(train.classes()[0], "T-shirt/top");
  EXPECT_EQ(train.classes()[9], "Ankle boot");

  // (pixel / 255 - 0.2860) / 0.3530, worked out by hand.
  const Tensor x = train.inputs();
  EXPECT_FLOAT_EQ(x[0][0][0][0].item<float>(), -0.8101983f);  // -0.286 / 0.353
  EXPECT_FLOAT_EQ(x[1][0][27][27].item<float>(), 2.0226629f);  // 0.714 / 0.353
  EXPECT_FLOAT_EQ(x[2][0][0][0].item<float>(), -0.2436261f);  // (0.2 - 0.286) / 0.353
  EXPECT_FLOAT_EQ(x[2][0][5][7].item<float>(), 0.6117869f);  // (128/255 - 0.286) / 0.353
  // And bit for bit what torchvision computes in float32: x.div(255), then sub_(mean).div_(std).
  for (int p : {0, 51, 128, 255}) {
    const float expected = (static_cast<float>(p) / 255.0f - 0.2860f) / 0.3530f;
    const int image = p == 0 ? 0 : p == 255 ? 1 : 2;
    const float got = p == 128 ? x[2][0][5][7].item<float>() : x[image][0][3][3].item<float>();
    EXPECT_EQ(got, expected) << "pixel " << p;
  }

  const TensorDataset test = fashion_mnist(dir.path(), false);
  EXPECT_EQ(test.inputs().shape(), (Shape{1, 1, 28, 28}));
  EXPECT_EQ(test.targets().to_vector<int64_t>(), (std::vector<int64_t>{3}));
}

TEST(FashionMnist, RejectsMismatchedCounts) {
  TempDir dir;
  write_fashion(dir, "train", Bytes(3 * 784, 0), {1, 2}, false);
  expect_error([&] { fashion_mnist(dir.path(), true); }, "holds 3 images but '" + dir.file("train-labels-idx1-ubyte") + "' holds 2 labels");
}

TEST(FashionMnist, RejectsLabelsThatAreNotClasses) {
  TempDir dir;
  write_fashion(dir, "t10k", Bytes(2 * 784, 0), {9, 10}, true);
  expect_error([&] { fashion_mnist(dir.path(), false); }, "label 10 of sample 1 is not a class (expected 0..9)");
}

TEST(FashionMnist, RejectsAnEmptySplitAndImagesOfAnotherSize) {
  TempDir dir;
  write_fashion(dir, "train", Bytes(784, 0), {1}, true);
  write_fashion(dir, "t10k", {}, {}, true);  // valid IDX files of 0 images and 0 labels
  expect_error([&] { fashion_mnist(dir.path(), false); },
               "fashion_mnist: '" + dir.file("t10k-images-idx3-ubyte.gz") + "' (the test split) holds 0 images");
  // 28 images of 28x1: the same bytes as one 28x28 image, but not Fashion-MNIST.
  write_file(dir.file("train-images-idx3-ubyte"), idx(0x803, {28, 28, 1}, Bytes(784, 0)));
  write_file(dir.file("train-labels-idx1-ubyte"), idx(0x801, {28}, Bytes(28, 0)));
  fs::remove(dir.file("train-images-idx3-ubyte.gz"));
  fs::remove(dir.file("train-labels-idx1-ubyte.gz"));
  expect_error([&] { fashion_mnist(dir.path(), true); }, "holds images of 28x1 but Fashion-MNIST's are 28x28");
}

TEST(FashionMnist, NamesBothSpellingsOfAMissingFile) {
  TempDir dir;
  write_fashion(dir, "train", Bytes(784, 0), {1}, false);
  fs::remove(dir.file("train-labels-idx1-ubyte"));
  expect_error([&] { fashion_mnist(dir.path(), true); },
               "fashion_mnist: neither '" + dir.file("train-labels-idx1-ubyte") + "' nor '" + dir.file("train-labels-idx1-ubyte.gz") + "' exists");
}

TEST(FindDataDir, FlagThenEnvironmentThenFallbacks) {
  TempDir flag, env, fallback, incomplete;
  for (const TempDir* dir : {&flag, &env, &fallback}) {
    write_fashion(*dir, "train", Bytes(784, 0), {1}, true);
    write_fashion(*dir, "t10k", Bytes(784, 0), {1}, false);
  }
  write_fashion(incomplete, "train", Bytes(784, 0), {1}, true);  // no t10k files

  {
    EnvGuard guard("LOCKSTEP_DATA", env.path().c_str());
    EXPECT_EQ(find_data_dir(flag.path(), {fallback.path()}), flag.path());
    EXPECT_EQ(find_data_dir("", {fallback.path()}), env.path());
  }
  {
    EnvGuard guard("LOCKSTEP_DATA", nullptr);
    // Among the defaults, a directory without all four files is passed over.
    EXPECT_EQ(find_data_dir("", {incomplete.path(), fallback.path()}), fallback.path());
  }
}

// A name that holds something other than a file (a FIFO) is found, and the reader then says
// what it is, where "missing" would send the user looking for a file that is there.
TEST(FindDataDir, AFifoInPlaceOfAFileIsNamedNotMissing) {
  TempDir dir;
  write_fashion(dir, "train", Bytes(784, 0), {1}, true);
  ASSERT_EQ(::mkfifo(dir.file("t10k-images-idx3-ubyte").c_str(), 0600), 0);
  write_file(dir.file("t10k-labels-idx1-ubyte"), {0, 0, 8, 1, 0, 0, 0, 1, 1});
  EnvGuard guard("LOCKSTEP_DATA", nullptr);
  EXPECT_EQ(find_data_dir(dir.path(), {}), dir.path());
  expect_error([&] { fashion_mnist(dir.path(), false); },
               "'" + dir.file("t10k-images-idx3-ubyte") + "' is a FIFO (named pipe); name a regular file");
}

TEST(FindDataDir, ADirectoryTheUserNamedMustHoldTheFiles) {
  TempDir incomplete, fallback;
  write_fashion(incomplete, "train", Bytes(784, 0), {1}, true);
  write_fashion(fallback, "train", Bytes(784, 0), {1}, true);
  write_fashion(fallback, "t10k", Bytes(784, 0), {1}, false);
  {
    // The caller names a directory: no silent fallback to another copy of the data.
    EnvGuard guard("LOCKSTEP_DATA", nullptr);
    expect_error([&] { find_data_dir(incomplete.path(), {fallback.path()}); }, ErrorKind::DataNotFound,
                 "'" + incomplete.path() + "' (the directory asked for) does not hold the Fashion-MNIST files: missing "
                 "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte");
    expect_error([&] { find_data_dir("/no/such/dir", {fallback.path()}); }, ErrorKind::DataNotFound,
                 "'/no/such/dir' (the directory asked for)");
  }
  {
    EnvGuard guard("LOCKSTEP_DATA", "/no/such/env/dir");
    expect_error([&] { find_data_dir("", {fallback.path()}); }, ErrorKind::DataNotFound,
                 "'/no/such/env/dir' (from $LOCKSTEP_DATA)");
  }
}

TEST(FindDataDir, SaysWhereItLookedAndHowToGetTheData) {
  TempDir incomplete;
  write_fashion(incomplete, "train", Bytes(784, 0), {1}, true);
  EnvGuard guard("LOCKSTEP_DATA", nullptr);
  const auto call = [&] { find_data_dir("", {incomplete.path(), "/no/such/default"}); };
  expect_error(call, ErrorKind::DataNotFound, "looked in '" + incomplete.path() + "', '/no/such/default'");
  expect_error(call, "apt-get install dataset-fashion-mnist");
  expect_error(call, "or name the directory that holds them (find_data_dir's argument, or $LOCKSTEP_DATA)");
}

// ---------------------------------------------------------------------------------------------
// CIFAR-10

namespace {
// One CIFAR-10 record: the label, then planes of red = r, green = g, blue = b, except that
// pixel (row 1, column 2) of each plane holds its channel index + 10.
Bytes cifar_record(uint8_t label, uint8_t r, uint8_t g, uint8_t b) {
  Bytes record{label};
  for (uint8_t value : {r, g, b}) {
    Bytes plane(1024, value);
    plane[1 * 32 + 2] = static_cast<uint8_t>(10 + (record.size() - 1) / 1024);
    record.insert(record.end(), plane.begin(), plane.end());
  }
  return record;
}
Bytes concat(const std::vector<Bytes>& parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
}  // namespace

TEST(Cifar10, LoadsRecordsInChannelMajorOrderAndNormalisesPerChannel) {
  TempDir dir;
  write_file(dir.file("test_batch.bin"), concat({cifar_record(3, 0, 255, 51), cifar_record(7, 255, 0, 0)}));
  const TensorDataset test = cifar10(dir.path(), false, /*records_per_file=*/2);
  EXPECT_EQ(test.inputs().shape(), (Shape{2, 3, 32, 32}));
  EXPECT_EQ(test.targets().to_vector<int64_t>(), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(test.classes()[3], "cat");
  const Tensor x = test.inputs();
  // Per channel: (pixel / 255 - mean[c]) / std[c], worked out by hand.
  EXPECT_FLOAT_EQ(x[0][0][0][0].item<float>(), -1.9894737f);  // -0.4914 / 0.2470
  EXPECT_FLOAT_EQ(x[0][1][31][31].item<float>(), 2.1264887f);  // (1 - 0.4822) / 0.2435
  EXPECT_FLOAT_EQ(x[0][2][5][5].item<float>(), -0.9422783f);  // (0.2 - 0.4465) / 0.2616
  EXPECT_FLOAT_EQ(x[1][0][0][0].item<float>(), 2.0591093f);  // (1 - 0.4914) / 0.2470
  // The marked pixel: channel c, row 1, column 2 holds 10 + c.
  for (int c = 0; c < 3; ++c) {
    const float expected = (static_cast<float>(10 + c) / 255.0f - kCifar10Mean[c]) / kCifar10Std[c];
    EXPECT_EQ(x[1][c][1][2].item<float>(), expected) << "channel " << c;
  }
}

TEST(Cifar10, LoadsTheFiveTrainingBatchesInOrder) {
  TempDir dir;
  for (int b = 1; b <= 5; ++b) {
    write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_record(static_cast<uint8_t>(b), 0, 0, 0));
  }
  const TensorDataset train = cifar10(dir.path(), true, /*records_per_file=*/1);
  EXPECT_EQ(train.targets().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  fs::remove(dir.file("data_batch_4.bin"));
  expect_error([&] { cifar10(dir.path(), true, 1); },
               dir.file("data_batch_4.bin") + ": cannot open (No such file or directory)");
}

TEST(Cifar10, RejectsALengthThatIsNotWholeRecords) {
  TempDir dir;
  Bytes bytes = concat({cifar_record(1, 0, 0, 0), cifar_record(2, 0, 0, 0)});
  bytes.pop_back();
  write_file(dir.file("test_batch.bin"), bytes);
  expect_error([&] { cifar10(dir.path(), false, 2); },
               "test_batch.bin' holds 6145 bytes (1 whole record and 3072 bytes of another) but should hold 2 records "
               "of 3073 bytes (6146 bytes: one label byte + 3x32x32 pixel bytes per image)");
}

// Files of whole records can still be wrong: empty, or cut at a record boundary. Each must hold
// the 10000 records of the real dataset.
TEST(Cifar10, RejectsEmptyFilesAndFilesCutAtARecordBoundary) {
  TempDir dir;
  write_file(dir.file("test_batch.bin"), {});
  expect_error([&] { cifar10(dir.path(), false); },
               "cifar10: '" + dir.file("test_batch.bin") + "' holds 0 bytes (it is empty) but should hold 10000 records "
               "of 3073 bytes (30730000 bytes: one label byte + 3x32x32 pixel bytes per image); the file is damaged "
               "or not from the binary version of CIFAR-10 (cifar-10-binary.tar.gz)");
  write_file(dir.file("test_batch.bin"), concat({cifar_record(1, 0, 0, 0), cifar_record(2, 0, 0, 0)}));
  expect_error([&] { cifar10(dir.path(), false); },
               "test_batch.bin' holds 6146 bytes (2 whole records) but should hold 10000 records");
  for (int b = 1; b <= 5; ++b) write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), cifar_record(1, 0, 0, 0));
  expect_error([&] { cifar10(dir.path(), true); },
               "data_batch_1.bin' holds 3073 bytes (1 whole record) but should hold 10000 records");
}

TEST(Cifar10, RejectsFilesWithMoreRecordsThanExpected) {
  TempDir dir;
  // Compressed, so that reading must stop at the expected size rather than at the file's end.
  write_gzip(dir.file("test_batch.bin"), concat({cifar_record(1, 0, 0, 0), cifar_record(2, 0, 0, 0)}));
  expect_error([&] { cifar10(dir.path(), false, 1); },
               "test_batch.bin' holds more than 3073 bytes but should hold 1 record of 3073 bytes");
}

TEST(Cifar10, RejectsLabelsThatAreNotClasses) {
  TempDir dir;
  write_file(dir.file("test_batch.bin"), concat({cifar_record(1, 0, 0, 0), cifar_record(10, 0, 0, 0)}));
  expect_error([&] { cifar10(dir.path(), false, 2); }, "label 10 of record 1 is not a class (expected 0..9)");
}

// ---------------------------------------------------------------------------------------------
// Image folders

namespace {
// Writes a PNG (or BMP by extension) of height x width x channels bytes, row by row.
void write_image(const std::string& path, int height, int width, int channels, const Bytes& pixels) {
  fs::create_directories(fs::path(path).parent_path());
  const bool bmp = fs::path(path).extension() == ".bmp";
  const int ok = bmp ? stbi_write_bmp(path.c_str(), width, height, channels, pixels.data())
                     : stbi_write_png(path.c_str(), width, height, channels, pixels.data(), width * channels);
  ASSERT_NE(ok, 0) << "could not write " << path;
}
}  // namespace

TEST(ImageFolder, SortsClassesAndFilesAndLaysPixelsOutAsChw) {
  TempDir root;
  // Written in an unsorted order, with extensions in mixed case and a file that is no image.
  write_image(root.file("dog/b.png"), 2, 3, 3, iota_bytes(18, 100));
  write_image(root.file("dog/a.PNG"), 2, 3, 3, iota_bytes(18, 0));
  write_image(root.file("cat/x.bmp"), 2, 3, 3, Bytes(18, 255));
  write_image(root.file("ant/deep/z.png"), 2, 3, 3, Bytes(18, 51));
  write_file(root.file("dog/notes.txt"), {'h', 'i'});

  const TensorDataset data = image_folder(root.path(), 3);
  EXPECT_EQ(data.classes(), (std::vector<std::string>{"ant", "cat", "dog"}));
  EXPECT_EQ(data.targets().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2}));
  EXPECT_EQ(data.inputs().shape(), (Shape{4, 3, 2, 3}));
  const Tensor x = data.inputs();
  EXPECT_EQ(x[0][1][1][2].item<float>(), 51.0f / 255.0f);
  EXPECT_EQ(x[1][2][0][0].item<float>(), 1.0f);
  // dog/a.PNG comes before dog/b.png; its byte at (row y, column x, channel c) is
  // (y * 3 + x) * 3 + c, found at inputs[2][c][y][x].
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 2; ++y) {
      for (int xx = 0; xx < 3; ++xx) {
        EXPECT_EQ(x[2][c][y][xx].item<float>(), static_cast<float>((y * 3 + xx) * 3 + c) / 255.0f);
        EXPECT_EQ(x[3][c][y][xx].item<float>(), static_cast<float>(100 + (y * 3 + xx) * 3 + c) / 255.0f);
      }
    }
  }
}

TEST(ImageFolder, ConvertsToTheRequestedChannels) {
  TempDir root;
  write_image(root.file("gray/a.png"), 1, 2, 1, {10, 200});
  const TensorDataset gray = image_folder(root.path(), 1);
  EXPECT_EQ(gray.inputs().shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(gray.inputs().to_vector<float>(), (std::vector<float>{10.0f / 255, 200.0f / 255}));
  // Gray to RGB copies the value into each channel.
  const TensorDataset rgb = image_folder(root.path(), 3);
  EXPECT_EQ(rgb.inputs().to_vector<float>(),
            (std::vector<float>{10.0f / 255, 200.0f / 255, 10.0f / 255, 200.0f / 255, 10.0f / 255, 200.0f / 255}));
  expect_error([&] { image_folder(root.path(), 4); }, "image_folder: expected 1 (grayscale) or 3 (RGB) channels, got 4");
}

TEST(ImageFolder, RejectsAnEmptyClassFolder) {
  TempDir root;
  write_image(root.file("ant/a.png"), 1, 1, 3, {1, 2, 3});
  fs::create_directories(root.file("cat"));
  write_file(root.file("cat/readme.txt"), {'x'});
  expect_error([&] { image_folder(root.path()); }, "image_folder: class folder '" + root.file("cat") + "' contains no images");
}

TEST(ImageFolder, RejectsAnImageItCannotDecode) {
  TempDir root;
  write_image(root.file("cat/a.png"), 1, 1, 3, {1, 2, 3});
  write_file(root.file("cat/x.png"), {'n', 'o', 't', ' ', 'a', ' ', 'p', 'n', 'g'});
  // The reason is stb_image's own words.
  expect_error([&] { image_folder(root.path()); }, "image_folder: cannot decode '" + root.file("cat/x.png") + "': ");
}

TEST(ImageFolder, RejectsImagesOfDifferentSizes) {
  TempDir root;
  write_image(root.file("cat/a.png"), 2, 2, 3, Bytes(12, 0));
  write_image(root.file("dog/b.png"), 3, 2, 3, Bytes(18, 0));
  expect_error([&] { image_folder(root.path()); },
               "'" + root.file("dog/b.png") + "' is 3x2 (height x width) but '" + root.file("cat/a.png") + "' is 2x2");
}

TEST(ImageFolder, RejectsAMissingRootAndARootWithoutClasses) {
  TempDir root;
  expect_error([&] { image_folder(root.file("missing")); }, "root folder '" + root.file("missing") + "' does not exist");
  write_file(root.file("loose.png"), {0});
  expect_error([&] { image_folder(root.path()); }, "'" + root.path() + "' has no class folders");
}
