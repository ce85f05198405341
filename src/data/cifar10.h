/// \file
/// CIFAR-10 (torchvision.datasets.CIFAR10): 32x32 colour images in 10 classes, 50,000 for
/// training and 10,000 for testing, read from the "binary version" of the dataset
/// (cifar-10-batches-bin: data_batch_1.bin ... data_batch_5.bin and test_batch.bin).
///
/// Each file is a run of 10,000 records of 3073 bytes: one label byte, then the 3x32x32 pixels
/// in channel-major order (1024 red, 1024 green, 1024 blue bytes, each plane row by row).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep {

/// Per-channel (red, green, blue) mean of the CIFAR-10 training pixels in [0, 1].
constexpr float kCifar10Mean[3] = {0.4914f, 0.4822f, 0.4465f};
/// Per-channel (red, green, blue) standard deviation of the CIFAR-10 training pixels.
constexpr float kCifar10Std[3] = {0.2470f, 0.2435f, 0.2616f};

/// The ten class names, indexed by label ("airplane", "automobile", ... "truck").
const std::vector<std::string>& cifar10_classes();

/// Records in each file of the binary version: 10000 (five training files, one test file).
constexpr int64_t kCifar10RecordsPerFile = 10000;
/// Bytes per record: one label byte, then the image's 3 x 32 x 32 pixel bytes.
constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

/// The paths of the files that cifar10(root, train) reads, in the order it reads them:
/// `root`/data_batch_1.bin to data_batch_5.bin for the training set, `root`/test_batch.bin for
/// the test set.
std::vector<std::string> cifar10_files(const std::string& root, bool train);

/// Loads the training set (data_batch_1.bin to data_batch_5.bin, in that order) or the test set
/// (test_batch.bin) from directory `root`. Inputs are f32 (N, 3, 32, 32), scaled to [0, 1] and
/// normalised per channel with kCifar10Mean and kCifar10Std; targets are i64 (N) in 0..9.
/// Each file must hold exactly `records_per_file` records (the real dataset's 10000 unless a
/// caller made smaller files, as tests do). Throws, naming the file, if a file is missing or
/// not a regular file (a FIFO, a folder: see util/regular_file.h), its length is not exactly
/// that many whole records (empty, cut short at or inside a record, or longer; reading stops
/// one byte past the expected size, so a file never costs more memory than that), or a label
/// is not a class, e.g. `cifar10: 'test_batch.bin' holds 6146 bytes (2 whole records) but
/// should hold 10000 records of 3073 bytes (30730000 bytes: ...); the file is damaged or not
/// from the binary version of CIFAR-10 (cifar-10-binary.tar.gz)`.
TensorDataset cifar10(const std::string& root, bool train, int64_t records_per_file = kCifar10RecordsPerFile);

}  // namespace lockstep
