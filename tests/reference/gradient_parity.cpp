// Gradient parity with PyTorch, the half written in Lockstep.
//
// Builds chapter 2's model in float64, takes the first 64 Fashion-MNIST training images, and
// writes to OUT_DIR: the initial weights, the gradients of the first batch's loss, and the
// weights after three SGD (momentum 0.9) steps, all as safetensors. gradient_parity.py does
// the same in PyTorch from the same initial weights and compares. In float64 the two agree to
// rounding (~1e-15): the same math, op for op. (In float32 they differ by more, because a
// last-bit difference can flip which element wins a max-pool window.)
//
// Usage: gradient_parity MODEL OUT_DIR [DATA_DIR]
#include <iostream>
#include <numeric>

#include "lockstep.h"

using namespace lockstep;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: gradient_parity mlp|cnn OUT_DIR [DATA_DIR]\n";
    return 2;
  }
  const std::string out = argv[2];
  try {
    manual_seed(0);
    auto model = make_model(argv[1]);
    model->to(DType::f64);
    save_safetensors(out + "/weights.safetensors", model->state_dict());

    // The first 64 training images, in order.
    const TensorDataset train = fashion_mnist(find_data_dir(argc > 3 ? argv[3] : ""), true);
    std::vector<int64_t> first(64);
    std::iota(first.begin(), first.end(), 0);
    const Batch batch = train.get_batch(first);
    const Tensor inputs = batch.inputs.to(DType::f64);

    SGD optimizer(model->parameters(), SGDOptions(0.05).momentum(0.9));
    for (int step = 0; step < 3; ++step) {
      const Tensor loss = cross_entropy((*model)(inputs), batch.targets);
      optimizer.zero_grad();
      loss.backward();
      if (step == 0) {
        StateDict grads;
        for (const auto& [name, parameter] : model->named_parameters()) grads.push_back({name, parameter.grad()});
        save_safetensors(out + "/grads.safetensors", grads);
      }
      optimizer.step();
    }
    save_safetensors(out + "/after.safetensors", model->state_dict());
    return 0;
  } catch (const Error& e) {
    std::cerr << "gradient_parity: " << e.what() << "\n";
    return 1;
  }
}
