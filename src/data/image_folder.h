/// \file
/// A folder of images sorted into one sub-folder per class (torchvision.datasets.ImageFolder):
///
///     root/cat/001.png
///     root/cat/002.jpg
///     root/dog/a.bmp
///
/// Classes are the sub-folder names in sorted order, and a class's label is its position in
/// that order (cat = 0, dog = 1). Images are decoded with stb_image.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace lockstep {

/// Loads every .png, .jpg, .jpeg and .bmp file (extension in any case) below each class folder
/// of `root`, in sorted path order within a class, into memory. Inputs are f32
/// (N, channels, H, W) in [0, 1] (torchvision's ToTensor, without normalisation); `channels` is
/// 1 (grayscale) or 3 (RGB), and images are converted to it. Every image must have the same
/// height and width. Targets are i64 (N); classes() holds the folder names. Other files are
/// skipped. Throws if root is missing, has no class folders, a class folder has no images, an
/// image cannot be opened (or is no longer a regular file: util/regular_file.h) or decoded, or
/// the sizes differ.
TensorDataset image_folder(const std::string& root, int64_t channels = 3);

}  // namespace lockstep
