#include "data/cifar10.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/gzip_file.h"

namespace lockstep {

namespace {

constexpr int64_t kImageBytes = kCifar10RecordBytes - 1;  // one image: (3, 32, 32) u8, after its label

// What a file of `bytes` holds, in records, for an error message: "0 bytes (it is empty)",
// "6146 bytes (2 whole records)", "6145 bytes (1 whole record and 3072 bytes of another)", or
// "more than 30730000 bytes" when reading stopped one byte past `expected`.
std::string describe_length(int64_t bytes, int64_t expected) {
  if (bytes > expected) return detail::concat("more than ", expected, " bytes");
  if (bytes == 0) return "0 bytes (it is empty)";
  const int64_t whole = bytes / kCifar10RecordBytes, partial = bytes % kCifar10RecordBytes;
  std::string text = detail::concat(bytes, " bytes (", whole, whole == 1 ? " whole record" : " whole records");
  if (partial != 0) text += detail::concat(" and ", partial, " bytes of another");
  return text + ")";
}

}  // namespace

const std::vector<std::string>& cifar10_classes() {
  static const std::vector<std::string> classes = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                   "dog",      "frog",       "horse", "ship", "truck"};
  return classes;
}

std::vector<std::string> cifar10_files(const std::string& root, bool train) {
  const std::filesystem::path folder(root);
  if (!train) return {(folder / "test_batch.bin").string()};
  std::vector<std::string> paths;
  for (int b = 1; b <= 5; ++b) paths.push_back((folder / ("data_batch_" + std::to_string(b) + ".bin")).string());
  return paths;
}

TensorDataset cifar10(const std::string& root, bool train, int64_t records_per_file) {
  LOCKSTEP_CHECK(records_per_file > 0, "cifar10: expected a positive number of records per file, got ",
                 records_per_file);

  // Each file must hold exactly `records_per_file` whole records. The file has no header, so
  // that count is the only size there is to trust: reading stops one byte past it, which
  // bounds memory (a compressed file cannot inflate beyond it) and tells a file with too much
  // data from a complete one. A file cut at a record boundary holds whole records but too
  // few, which is why the count and not only the record size is checked.
  LOCKSTEP_CHECK(records_per_file <= (int64_t(1) << 31) / kCifar10RecordBytes, "cifar10: ", records_per_file,
                 " records per file would need more than 2^31 bytes per file; CIFAR-10's files hold 10000");
  const int64_t expected = records_per_file * kCifar10RecordBytes;
  std::vector<std::vector<uint8_t>> files;
  const std::vector<std::string> paths = cifar10_files(root, train);
  for (const std::string& path : paths) {
    files.push_back(GzipFile(path, "cifar10").read_up_to(expected + 1));
    const int64_t bytes = static_cast<int64_t>(files.back().size());
    LOCKSTEP_CHECK(bytes == expected, "cifar10: '", path, "' holds ", describe_length(bytes, expected),
                   " but should hold ", records_per_file, records_per_file == 1 ? " record of " : " records of ",
                   kCifar10RecordBytes, " bytes (", expected,
                   " bytes: one label byte + 3x32x32 pixel bytes per image); the file is damaged or not from the ",
                   "binary version of CIFAR-10 (cifar-10-binary.tar.gz)");
  }
  const int64_t n = records_per_file * static_cast<int64_t>(files.size());

  // Split the records into pixels (N, 3, 32, 32) and labels (N).
  Tensor pixels = empty({n, 3, 32, 32}, TensorOptions().dtype(DType::u8));
  Tensor targets = empty({n}, TensorOptions().dtype(DType::i64));
  uint8_t* pixel = pixels.data_ptr<uint8_t>();
  int64_t* label = targets.data_ptr<int64_t>();
  int64_t i = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<uint8_t>& bytes = files[f];
    for (size_t offset = 0; offset < bytes.size(); offset += kCifar10RecordBytes, ++i) {
      LOCKSTEP_CHECK(bytes[offset] < 10, "cifar10: '", paths[f], "': label ", int(bytes[offset]), " of record ",
                     offset / kCifar10RecordBytes, " is not a class (expected 0..9)");
      label[i] = bytes[offset];
      std::memcpy(pixel + i * kImageBytes, bytes.data() + offset + 1, kImageBytes);
    }
  }
  return TensorDataset(pixels_to_float(pixels, {kCifar10Mean, kCifar10Mean + 3}, {kCifar10Std, kCifar10Std + 3}),
                       targets, cifar10_classes());
}

}  // namespace lockstep
