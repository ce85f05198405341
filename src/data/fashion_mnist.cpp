#include "data/fashion_mnist.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "data/idx.h"

namespace lockstep {

namespace {

namespace fs = std::filesystem;

// The four files of the original distribution, without their optional ".gz".
const char* const kFileNames[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                  "t10k-labels-idx1-ubyte"};

// The path of `name` in `root`, compressed or not; empty if neither exists.
std::string find_file(const std::string& root, const std::string& name) {
  for (const std::string& candidate : {name, name + ".gz"}) {
    const fs::path path = fs::path(root) / candidate;
    // Whatever the name holds: a FIFO or a folder is refused by the reader, naming what it is,
    // where "missing" would send the reader looking for a file that is there.
    std::error_code error;
    if (fs::exists(path, error)) return path.string();
  }
  return "";
}

// The path of `name` in `root`, or an error saying both names were tried.
std::string require_file(const std::string& root, const std::string& name) {
  const std::string path = find_file(root, name);
  LOCKSTEP_CHECK(!path.empty(), "fashion_mnist: neither '", (fs::path(root) / name).string(), "' nor '",
                 (fs::path(root) / (name + ".gz")).string(), "' exists");
  return path;
}

}  // namespace

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return classes;
}

std::vector<std::string> fashion_mnist_files(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  return {require_file(root, prefix + "-images-idx3-ubyte"), require_file(root, prefix + "-labels-idx1-ubyte")};
}

TensorDataset fashion_mnist(const std::string& root, bool train) {
  const std::vector<std::string> paths = fashion_mnist_files(root, train);
  const std::string& images_path = paths[0];
  const std::string& labels_path = paths[1];
  const Tensor images = read_idx_images(images_path);  // images: (N, 28, 28) u8
  const Tensor labels = read_idx_labels(labels_path);  // labels: (N) u8

  // An empty split would train on nothing or report an accuracy of 0/0 much later; images of
  // another size would fail in the model's first layer with no word about the file.
  const int64_t n = images.size(0);
  const char* split = train ? "training" : "test";
  LOCKSTEP_CHECK(n > 0, "fashion_mnist: '", images_path, "' (the ", split,
                 " split) holds 0 images; the file is incomplete: replace it with the original one");
  LOCKSTEP_CHECK(images.size(1) == 28 && images.size(2) == 28, "fashion_mnist: '", images_path, "' holds images of ",
                 images.size(1), "x", images.size(2), " but Fashion-MNIST's are 28x28; it is not a Fashion-MNIST file");

  // The two files must describe the same samples.
  LOCKSTEP_CHECK(labels.size(0) == n, "fashion_mnist: '", images_path, "' holds ", n, " images but '", labels_path,
                 "' holds ", labels.size(0), " labels");
  const Tensor targets = labels.to(DType::i64);  // targets: (N) i64
  const int64_t* label = targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    LOCKSTEP_CHECK(label[i] < 10, "fashion_mnist: '", labels_path, "': label ", label[i], " of sample ", i,
                   " is not a class (expected 0..9)");
  }

  // One channel: (N, 28, 28) -> (N, 1, 28, 28), then ToTensor + Normalize.
  const Tensor pixels = images.unsqueeze(1);
  return TensorDataset(pixels_to_float(pixels, {kFashionMnistMean}, {kFashionMnistStd}), targets,
                       fashion_mnist_classes());
}

std::string find_data_dir(const std::string& directory, const std::vector<std::string>& fallbacks) {
  auto missing_files = [](const std::string& directory) {
    std::string missing;
    for (const char* name : kFileNames) {
      if (find_file(directory, name).empty()) missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
    return missing;
  };
  // A directory the user named (argument or environment) must hold the files: silently training
  // on data from somewhere else would hide the mistake.
  const char* environment = std::getenv("LOCKSTEP_DATA");
  const bool named = !directory.empty();
  if (named || (environment != nullptr && *environment != '\0')) {
    const std::string chosen = named ? directory : environment;
    const std::string missing = missing_files(chosen);
    LOCKSTEP_CHECK_KIND(missing.empty(), ErrorKind::DataNotFound, "find_data_dir: '", chosen, "' (",
                        named ? "the directory asked for" : "from $LOCKSTEP_DATA",
                        ") does not hold the Fashion-MNIST files: missing ", missing, " (each may also end in .gz)");
    return chosen;
  }
  // Otherwise the first default location that has them.
  std::string looked;
  for (const std::string& directory : fallbacks) {
    if (missing_files(directory).empty()) return directory;
    looked += (looked.empty() ? "'" : ", '") + directory + "'";
  }
  throw Error(ErrorKind::DataNotFound,
              detail::concat("find_data_dir: no directory holds the four Fashion-MNIST files ",
                             "({train,t10k}-{images-idx3,labels-idx1}-ubyte, optionally .gz); looked in ", looked,
                             ". Install them with `apt-get install dataset-fashion-mnist`, or name the directory that "
                             "holds them (find_data_dir's argument, or $LOCKSTEP_DATA)"));
}

}  // namespace lockstep
