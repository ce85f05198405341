/// \file
/// Fashion-MNIST (torchvision.datasets.FashionMNIST): 28x28 grayscale images of clothing in 10
/// classes, 60,000 for training and 10,000 for testing, read from the four IDX files of the
/// original distribution, and the lookup that finds those files on this machine.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep {

/// Mean of the Fashion-MNIST training pixels (in [0, 1]), as in Normalize((0.2860,), (0.3530,)).
constexpr float kFashionMnistMean = 0.2860f;
/// Standard deviation of the Fashion-MNIST training pixels (in [0, 1]).
constexpr float kFashionMnistStd = 0.3530f;

/// The ten class names, indexed by label ("T-shirt/top", "Trouser", ... "Ankle boot").
const std::vector<std::string>& fashion_mnist_classes();

/// The paths of the two files that fashion_mnist(root, train) reads, images then labels: each
/// the uncompressed name if that file exists in `root`, else the one ending in .gz. Throws,
/// naming both names, when neither exists.
std::vector<std::string> fashion_mnist_files(const std::string& root, bool train);

/// Loads the training set (`train`: train-images-idx3-ubyte, train-labels-idx1-ubyte) or the
/// test set (t10k-...) from directory `root`; each file may also be gzip-compressed with a .gz
/// suffix. Inputs are f32 (N, 1, 28, 28), the pixels scaled to [0, 1] and then normalised with
/// kFashionMnistMean and kFashionMnistStd (torchvision's ToTensor() + Normalize); targets are
/// i64 (N) in 0..9. Throws, naming the file, if a file is missing or corrupt (see
/// read_idx_images), holds no images or images other than 28x28, the image and label counts
/// differ, or a label is not a class.
TensorDataset fashion_mnist(const std::string& root, bool train);

/// Finds the directory holding the four Fashion-MNIST files (either naming). A directory the
/// user named, `directory` if non-empty or else $LOCKSTEP_DATA if set, must hold them (otherwise
/// an error of kind ErrorKind::DataNotFound names what is missing); with neither, the first of
/// `fallbacks` that holds them is used: "data" (relative to the working directory), then
/// Debian's dataset-fashion-mnist. If none does, the error (of the same kind) lists where it
/// looked and how to get the data.
std::string find_data_dir(const std::string& directory,
                          const std::vector<std::string>& fallbacks = {"data", "/usr/share/datasets/fashion-mnist"});

}  // namespace lockstep
