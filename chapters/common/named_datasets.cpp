#include "common/named_datasets.h"

#include "core/error.h"
#include "data/cifar10.h"
#include "data/fashion_mnist.h"

namespace lockstep {

TrainTestSets load_train_test(const std::string& name, const std::string& data_dir) {
  TrainTestSets sets;
  if (name == "cifar10") {
    LOCKSTEP_CHECK(!data_dir.empty(), "--dataset cifar10 needs --data DIR, a directory holding CIFAR-10's binary "
                                      "version (data_batch_1.bin ... data_batch_5.bin, test_batch.bin)");
    sets = {std::make_shared<TensorDataset>(cifar10(data_dir, true)),
            std::make_shared<TensorDataset>(cifar10(data_dir, false)), data_dir};
  } else {
    LOCKSTEP_CHECK(name == "fashion-mnist", "unknown dataset '", name, "': expected fashion-mnist or cifar10");
    // Fashion-MNIST is found in the usual places: --data, $LOCKSTEP_DATA, data/, Debian's package.
    const std::string root = find_data_dir(data_dir);
    sets = {std::make_shared<TensorDataset>(fashion_mnist(root, true)),
            std::make_shared<TensorDataset>(fashion_mnist(root, false)), root};
  }
  LOCKSTEP_CHECK(sets.train->size() > 0, "the training set holds no images: nothing to train on");
  return sets;
}

void check_model_fits_dataset(const std::string& model, const std::string& dataset) {
  LOCKSTEP_CHECK(dataset != "cifar10" || model == "resnet", "the ", model,
                 " model expects 1 x 28 x 28 Fashion-MNIST images: use --model resnet with --dataset cifar10");
  LOCKSTEP_CHECK(model != "resnet" || dataset == "cifar10",
                 "the resnet model expects 3 x 32 x 32 images: use --dataset cifar10 --data DIR");
}

}  // namespace lockstep
