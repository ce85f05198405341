// Fuzz target: the CIFAR-10 reader (cifar10; src/data/cifar10.h), on a test set of one to three
// records, so that whole files stay small enough to mutate.
//
// Feeds: the first byte of the input chooses the records per file (1 + byte % 3); the rest is
// test_batch.bin in a folder of its own, read with cifar10(folder, train = false, records).
// Files beginning with the gzip magic are decoded by zlib, as the reader allows.
// Asserts: no crash, no undefined behaviour, no hang, and no exception but lockstep::Error; a
// file that reads is exactly that many records long, and gives f32 inputs (N, 3, 32, 32) and
// i64 targets (N) whose labels are the records' label bytes, all classes 0..9, and whose
// first pixel is the record's byte normalised by the red channel's mean and deviation.
#include <cmath>
#include <optional>

#include "core/error.h"
#include "data/cifar10.h"
#include "fuzz_input.h"

using lockstep::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int64_t records = 1 + data[0] % 3;
  const uint8_t* file = data + 1;
  const size_t file_size = size - 1;
  lockstep::fuzz::write_file("test_batch.bin", file, file_size);
  std::optional<lockstep::TensorDataset> dataset;
  try {
    dataset.emplace(lockstep::cifar10(lockstep::fuzz::scratch_folder(), false, records));
  } catch (const lockstep::Error&) {
    return 0;  // the documented way to refuse a file
  }

  const lockstep::Tensor& inputs = dataset->inputs();
  const lockstep::Tensor& targets = dataset->targets();
  require(inputs.dtype() == lockstep::DType::f32 && targets.dtype() == lockstep::DType::i64,
          "inputs are f32 and targets i64");
  require(inputs.shape() == lockstep::Shape({records, 3, 32, 32}), "inputs are (records, 3, 32, 32)");
  require(targets.shape() == lockstep::Shape({records}), "targets are (records)");
  require(dataset->num_classes() == 10, "CIFAR-10 has ten classes");
  const bool plain = file_size < 2 || file[0] != 0x1f || file[1] != 0x8b;
  const int64_t* label = targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < records; ++i) require(label[i] >= 0 && label[i] < 10, "every label is a class");
  if (!plain) return 0;  // a gzip stream of the fuzzer's own: its decoded bytes are unknown here
  require(file_size == size_t(records * lockstep::kCifar10RecordBytes), "a file that reads is whole records");
  const float* pixel = inputs.data_ptr<float>();
  for (int64_t i = 0; i < records; ++i) {
    const uint8_t* record = file + i * lockstep::kCifar10RecordBytes;
    require(label[i] == record[0], "each target is its record's label byte");
    const float expected = (record[1] / 255.0f - lockstep::kCifar10Mean[0]) / lockstep::kCifar10Std[0];
    require(std::fabs(pixel[i * 3 * 32 * 32] - expected) <= 1e-5f,
            "each image's first pixel is its record's first byte, normalised");
  }
  return 0;
}
