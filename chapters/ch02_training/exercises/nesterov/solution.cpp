// Exercise ch02_nesterov: the reference solution.
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
    const Tensor d = grad + weight_decay_ * param;
    Tensor& buf = state_entry(param_index, "momentum_buffer");
    if (!buf.defined()) {
      buf = d.clone();
    } else {
      buf.mul_(momentum_).add_(d);  // in place: counted in the buffer's version
    }
    param.add_(d + momentum_ * buf, -lr());
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
