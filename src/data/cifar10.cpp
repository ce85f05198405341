#include "data/cifar10.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/gzip_file.h"

namespace lockstep {

namespace {

constexpr int64_t kImageBytes = 3 * 32 * 32;        // one image: (3, 32, 32) u8
constexpr int64_t kRecordBytes = 1 + kImageBytes;  // label byte + image

}  // namespace

const std::vector<std::string>& cifar10_classes() {
  static const std::vector<std::string> classes = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                   "dog",      "frog",       "horse", "ship", "truck"};
  return classes;
}

TensorDataset cifar10(const std::string& root, bool train) {
  std::vector<std::string> names;
  if (train) {
    for (int b = 1; b <= 5; ++b) names.push_back("data_batch_" + std::to_string(b) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }

  // Read every file whole and check it is a run of complete records before using it.
  std::vector<std::vector<uint8_t>> files;
  std::vector<std::string> paths;
  int64_t n = 0;
  for (const std::string& name : names) {
    const std::string path = (std::filesystem::path(root) / name).string();
    files.push_back(GzipFile(path).read_all());
    paths.push_back(path);
    const int64_t bytes = static_cast<int64_t>(files.back().size());
    LOCKSTEP_CHECK(bytes % kRecordBytes == 0, "cifar10: '", path, "' holds ", bytes, " bytes, not a multiple of ",
                   kRecordBytes, " (one label byte + 3x32x32 pixel bytes per image); the file is truncated or not ",
                   "from the binary version of CIFAR-10");
    n += bytes / kRecordBytes;
  }

  // Split the records into pixels (N, 3, 32, 32) and labels (N).
  Tensor pixels = empty({n, 3, 32, 32}, TensorOptions().dtype(DType::u8));
  Tensor targets = empty({n}, TensorOptions().dtype(DType::i64));
  uint8_t* pixel = pixels.data_ptr<uint8_t>();
  int64_t* label = targets.data_ptr<int64_t>();
  int64_t i = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<uint8_t>& bytes = files[f];
    for (size_t offset = 0; offset < bytes.size(); offset += kRecordBytes, ++i) {
      LOCKSTEP_CHECK(bytes[offset] < 10, "cifar10: '", paths[f], "': label ", int(bytes[offset]), " of record ",
                     offset / kRecordBytes, " is not a class (expected 0..9)");
      label[i] = bytes[offset];
      std::memcpy(pixel + i * kImageBytes, bytes.data() + offset + 1, kImageBytes);
    }
  }
  return TensorDataset(pixels_to_float(pixels, {kCifar10Mean, kCifar10Mean + 3}, {kCifar10Std, kCifar10Std + 3}),
                       targets, cifar10_classes());
}

}  // namespace lockstep
