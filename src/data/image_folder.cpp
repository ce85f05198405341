#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "util/regular_file.h"

// stb_image is a single-header library: this file holds its implementation. Only the formats
// image_folder accepts are compiled in, and its functions stay private to this file.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace lockstep {

namespace {

namespace fs = std::filesystem;

bool is_image_file(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".bmp";
}

// Image files anywhere below `folder`, sorted by path (so the order is the same on every machine).
std::vector<std::string> image_files(const fs::path& folder) {
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file() && is_image_file(entry.path())) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// An image decoded by stb_image: height x width x channels bytes, row by row, freed with it.
struct DecodedImage {
  std::unique_ptr<uint8_t, void (*)(void*)> pixels{nullptr, stbi_image_free};
  int height = 0;
  int width = 0;
};

DecodedImage decode(const std::string& path, int channels) {
  DecodedImage image;
  int file_channels = 0;
  const UniqueFile file = fopen_regular_file("image_folder", path, "rb");
  LOCKSTEP_CHECK(file != nullptr, "image_folder: cannot open '", path, "': ", std::strerror(errno));
  // The last argument asks stb_image to convert to `channels` (gray <-> RGB, alpha dropped).
  image.pixels.reset(stbi_load_from_file(file.get(), &image.width, &image.height, &file_channels, channels));
  LOCKSTEP_CHECK(image.pixels != nullptr, "image_folder: cannot decode '", path, "': ", stbi_failure_reason());
  return image;
}

}  // namespace

TensorDataset image_folder(const std::string& root, int64_t channels) {
  LOCKSTEP_CHECK(channels == 1 || channels == 3, "image_folder: expected 1 (grayscale) or 3 (RGB) channels, got ",
                 channels);
  LOCKSTEP_CHECK(fs::is_directory(root), "image_folder: root folder '", root, "' does not exist or is not a directory");

  // Classes: the sub-folders, sorted, so that label = position in the sorted list.
  std::vector<std::string> classes;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  LOCKSTEP_CHECK(!classes.empty(), "image_folder: '", root, "' has no class folders (expected ", root,
                 "/<class>/<image>)");

  // Every image's path and label, class by class.
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path folder = fs::path(root) / classes[label];
    const std::vector<std::string> files = image_files(folder);
    LOCKSTEP_CHECK(!files.empty(), "image_folder: class folder '", folder.string(),
                   "' contains no images (.png, .jpg, .jpeg or .bmp)");
    paths.insert(paths.end(), files.begin(), files.end());
    labels.insert(labels.end(), files.size(), static_cast<int64_t>(label));
  }

  // Decode each image into its slot of pixels (N, C, H, W); the first image fixes H and W.
  const int64_t n = static_cast<int64_t>(paths.size());
  Tensor pixels;
  for (int64_t i = 0; i < n; ++i) {
    const DecodedImage image = decode(paths[i], static_cast<int>(channels));
    if (i == 0) pixels = empty({n, channels, image.height, image.width}, TensorOptions().dtype(DType::u8));
    const int64_t height = pixels.size(2), width = pixels.size(3);
    LOCKSTEP_CHECK(image.height == height && image.width == width, "image_folder: '", paths[i], "' is ",
                   image.height, "x", image.width, " (height x width) but '", paths[0], "' is ", height, "x", width,
                   "; all images must have the same size");
    // stb_image gives (H, W, C) interleaved; tensors want (C, H, W) planes.
    uint8_t* out = pixels.data_ptr<uint8_t>() + i * channels * height * width;
    const uint8_t* in = image.pixels.get();
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < height * width; ++p) out[c * height * width + p] = in[p * channels + c];
    }
  }
  return TensorDataset(pixels_to_float(pixels), from_vector(labels, {n}), classes);
}

}  // namespace lockstep
