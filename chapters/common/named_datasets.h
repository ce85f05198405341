/// \file
/// The chapters' `--model` and `--dataset` flags: a dataset chosen by name, its training and
/// test sets loaded into memory, and which of the chapters' models take its images.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "data/dataset.h"

namespace lockstep {

/// A dataset's training and test sets, in memory, the directory they were read from, and a
/// fingerprint of the files' contents.
struct TrainTestSets {
  std::shared_ptr<TensorDataset> train;  ///< the training set
  std::shared_ptr<TensorDataset> test;   ///< the test set
  std::string directory;                 ///< where the files were found
  /// FNV-1a 64 (util/fnv1a.h) of the bytes of every file read, one after another in a fixed
  /// order, as 16 hex digits: ranks compare it, so that a rank whose copy of the data differs
  /// (another version, a file damaged on one node) is caught even when the sizes agree.
  std::string fingerprint;
};

/// Loads the dataset `name`: "fashion-mnist" (1 x 28 x 28), from `data_dir` or else from the
/// places find_data_dir() searches, or "cifar10" (3 x 32 x 32, CIFAR-10's binary version),
/// which has no Debian package and so must be in `data_dir`. Throws, naming what to do, for
/// another name, a missing directory, missing files or a training set without images. The files
/// are read a second time, as they are on disk, for TrainTestSets::fingerprint.
TrainTestSets load_train_test(const std::string& name, const std::string& data_dir);

/// Adds `--model` (one of make_model()'s names, into `model`) and `--dataset` (fashion-mnist or
/// cifar10, into `dataset`) to `app`; their defaults are the values they hold.
void add_model_and_dataset_options(CLI::App& app, std::string& model, std::string& dataset);

/// Refuses, with a sentence saying which flags fit, a model that cannot take the dataset's
/// images: make_model()'s "mlp" and "cnn" take 1 x 28 x 28 Fashion-MNIST images only, its
/// "resnet" and "resnet50" either dataset.
void check_model_fits_dataset(const std::string& model, const std::string& dataset);

/// The channels of the dataset's images, for make_model(model, channels): 1 for
/// "fashion-mnist", 3 for "cifar10".
int64_t dataset_channels(const std::string& dataset);

}  // namespace lockstep
