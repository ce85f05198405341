#include "common/named_datasets.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "data/cifar10.h"
#include "data/fashion_mnist.h"
#include "nn/models.h"
#include "util/fnv1a.h"
#include "util/regular_file.h"

namespace lockstep {

namespace {

// The records in each of CIFAR-10's files: the real dataset's 10000, unless the folder holds a
// smaller made-up copy (the tests write one), recognised by a first training file of fewer whole
// records. cifar10() then requires every file to hold exactly that many, so a file cut short is
// still refused, naming it.
int64_t cifar10_records_per_file(const std::string& dir) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(std::filesystem::path(dir) / "data_batch_1.bin", error);
  const int64_t records = error ? 0 : static_cast<int64_t>(bytes) / kCifar10RecordBytes;
  const bool made_up = records > 0 && records < kCifar10RecordsPerFile &&
                       static_cast<int64_t>(bytes) == records * kCifar10RecordBytes;
  return made_up ? records : kCifar10RecordsPerFile;
}

// FNV-1a 64 of the bytes of the training set's files and then the test set's, each file whole,
// as 16 hex digits.
std::string files_fingerprint(const std::vector<std::string>& train_files, const std::vector<std::string>& test_files) {
  uint64_t hash = kFnv1aOffsetBasis;
  std::vector<char> buffer(size_t(1) << 20);
  for (const std::vector<std::string>* paths : {&train_files, &test_files}) {
    for (const std::string& path : *paths) {
      const UniqueFile file = fopen_regular_file("--data", path, "rb");
      LOCKSTEP_CHECK(file != nullptr, "--data: cannot read '", path, "' (", std::strerror(errno), ")");
      size_t got = 0;
      while ((got = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) {
        hash = fnv1a(buffer.data(), got, hash);
      }
      LOCKSTEP_CHECK(!std::ferror(file.get()), "--data: cannot read '", path, "' (", std::strerror(errno), ")");
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace

TrainTestSets load_train_test(const std::string& name, const std::string& data_dir) {
  TrainTestSets sets;
  if (name == "cifar10") {
    LOCKSTEP_CHECK(!data_dir.empty(), "--dataset cifar10 needs --data DIR, a directory holding CIFAR-10's binary "
                                      "version (data_batch_1.bin ... data_batch_5.bin, test_batch.bin)");
    const int64_t records = cifar10_records_per_file(data_dir);
    sets = {std::make_shared<TensorDataset>(cifar10(data_dir, true, records)),
            std::make_shared<TensorDataset>(cifar10(data_dir, false, records)), data_dir,
            files_fingerprint(cifar10_files(data_dir, true), cifar10_files(data_dir, false))};
  } else {
    LOCKSTEP_CHECK(name == "fashion-mnist", "unknown dataset '", name, "': expected fashion-mnist or cifar10");
    // Fashion-MNIST is found in the usual places: --data, $LOCKSTEP_DATA, data/, Debian's package.
    const std::string root = find_data_dir(data_dir);
    sets = {std::make_shared<TensorDataset>(fashion_mnist(root, true)),
            std::make_shared<TensorDataset>(fashion_mnist(root, false)), root,
            files_fingerprint(fashion_mnist_files(root, true), fashion_mnist_files(root, false))};
  }
  LOCKSTEP_CHECK(sets.train->size() > 0, "the training set holds no images: nothing to train on");
  return sets;
}

void add_model_and_dataset_options(CLI::App& app, std::string& model, std::string& dataset) {
  app.add_option("--model", model, "mlp or cnn (Fashion-MNIST); resnet (a small ResNet) or resnet50 (torchvision's "
                                   "ResNet-50), for either dataset")
      ->check(CLI::IsMember(model_names()));
  app.add_option("--dataset", dataset, "fashion-mnist or cifar10")->check(CLI::IsMember({"fashion-mnist", "cifar10"}));
}

void check_model_fits_dataset(const std::string& model, const std::string& dataset) {
  const bool fashion_mnist_only = model == "mlp" || model == "cnn";
  LOCKSTEP_CHECK(dataset != "cifar10" || !fashion_mnist_only, "the ", model,
                 " model expects 1 x 28 x 28 Fashion-MNIST images: use --model resnet or resnet50 with --dataset "
                 "cifar10");
}

int64_t dataset_channels(const std::string& dataset) { return dataset == "cifar10" ? 3 : 1; }

}  // namespace lockstep
