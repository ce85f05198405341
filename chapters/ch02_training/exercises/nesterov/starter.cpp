// Exercise ch02_nesterov: your file. Write SGD with Nesterov momentum as an optimiser.
// Build and test it with:  make exercise EX=ch02_nesterov
#include <memory>
#include <utility>
#include <vector>

#include "lockstep.h"

namespace exercise {

using namespace lockstep;

/// SGD with Nesterov momentum and weight decay, following torch.optim.SGD(nesterov=True).
class NesterovSGD : public Optimizer {
 public:
  /// Optimises `params` with learning rate `lr`, momentum factor `momentum` and L2 penalty
  /// `weight_decay`.
  NesterovSGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
      : Optimizer("NesterovSGD", std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay) {}

 protected:
  /// One parameter's update; step() calls it under NoGradGuard for every parameter that has a
  /// gradient.
  void update(size_t param_index, const Tensor& param, const Tensor& grad) override {
    // TODO: PyTorch's rule, with d, buf and param tensors of param's shape:
    //   d = grad + weight_decay * param
    //   buf = d                        on the first step (state "momentum_buffer" undefined)
    //   buf = momentum * buf + d       on later steps
    //   d = d + momentum * buf         (Nesterov: look ahead along the momentum)
    //   param -= lr() * d              (write into param's memory: param.add_(d, -lr()))
    // Keep buf in state_entry(param_index, "momentum_buffer"), a Tensor& that starts undefined.
    (void)param_index, (void)param, (void)grad;
    throw Error("NesterovSGD::update: not written yet (write the TODO in starter.cpp)");
  }

 private:
  double momentum_;
  double weight_decay_;
};

std::unique_ptr<Optimizer> make_nesterov_sgd(std::vector<Tensor> params, double lr, double momentum,
                                             double weight_decay) {
  return std::make_unique<NesterovSGD>(std::move(params), lr, momentum, weight_decay);
}

}  // namespace exercise
