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

/// Loads the training set (data_batch_1.bin to data_batch_5.bin, in that order) or the test set
/// (test_batch.bin) from directory `root`. Inputs are f32 (N, 3, 32, 32), scaled to [0, 1] and
/// normalised per channel with kCifar10Mean and kCifar10Std; targets are i64 (N) in 0..9.
/// Throws if a file is missing, its length is not a whole number of records, or a label is
/// not a class.
TensorDataset cifar10(const std::string& root, bool train);

}  // namespace lockstep
