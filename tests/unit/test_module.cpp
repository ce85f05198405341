// Module: registration and dotted names, train/eval, zero_grad, in-place to(), state_dict and
// load_state_dict, printing. Expected names, orders and strings come from PyTorch 1.13 run on
// the same definitions (the Python is quoted next to each).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "lockstep.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/models.h"
#include "nn/module.h"
#include "nn/sequential.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

// A custom module that registers a child first and its own parameter and buffer after it:
//     class Scaled(nn.Module):
//         def __init__(self):
//             super().__init__()
//             self.fc = nn.Linear(3, 2)
//             self.scale = nn.Parameter(torch.ones(2))
//             self.register_buffer("count", torch.zeros((), dtype=torch.int64))
class Scaled : public Module {
 public:
  Scaled() {
    fc = register_module("fc", std::make_shared<Linear>(3, 2));
    scale = register_parameter("scale", ones({2}));
    count = register_buffer("count", zeros({}, TensorOptions().dtype(DType::i64)));
  }
  Tensor forward(const Tensor& x) override { return (*fc)(x) * scale; }

  std::shared_ptr<Linear> fc;
  Tensor scale;
  Tensor count;
};

// nn.Sequential(nn.Linear(4, 3), nn.Sequential(nn.ReLU(), Scaled()))
std::shared_ptr<Sequential> nested() {
  return std::make_shared<Sequential>(std::make_shared<Linear>(4, 3),
                                      std::make_shared<Sequential>(std::make_shared<ReLU>(), std::make_shared<Scaled>()));
}

template <class Named>
std::vector<std::string> names_of(const Named& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST(Module, NamesAreDottedAndInPyTorchOrder) {
  auto net = nested();
  // PyTorch: a module's own parameters come before its children's, whatever the order of
  // registration, so "1.1.scale" precedes "1.1.fc.weight".
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.1.scale", "1.1.fc.weight", "1.1.fc.bias"}));
  EXPECT_EQ(names_of(net->named_buffers()), (std::vector<std::string>{"1.1.count"}));
  EXPECT_EQ(names_of(net->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.1.scale", "1.1.count", "1.1.fc.weight", "1.1.fc.bias"}));
  EXPECT_EQ(names_of(net->named_children()), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(net->children().size(), 2u);
  EXPECT_EQ(net->parameters().size(), 5u);
  EXPECT_EQ(net->buffers().size(), 1u);
  // 4*3 + 3 + 2 + 3*2 + 2
  EXPECT_EQ(net->num_parameters(), 25);
}

TEST(Module, HandlesAreTheRegisteredTensors) {
  auto net = nested();
  auto first = std::dynamic_pointer_cast<Linear>((*net)[0]);
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(net->parameters()[0].is_same(first->weight));
  EXPECT_EQ(net->state_dict()[1].second.data(), first->bias.data());
  EXPECT_TRUE(first->weight.requires_grad());
  EXPECT_TRUE(first->weight.is_leaf());
  EXPECT_FALSE(net->buffers()[0].requires_grad());
}

TEST(Module, SharedTensorsAreListedOnceButSavedUnderEveryName) {
  // lin = nn.Linear(2, 2); nn.Sequential(lin, lin): named_parameters gives 0.weight, 0.bias;
  // state_dict gives 0.weight, 0.bias, 1.weight, 1.bias.
  auto lin = std::make_shared<Linear>(2, 2);
  Sequential tied(lin, lin);
  EXPECT_EQ(names_of(tied.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(names_of(tied.state_dict()), (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  EXPECT_EQ(tied.num_parameters(), 6);
}

TEST(Module, RegistrationRejectsBadNamesAndTypes) {
  Scaled m;
  expect_error([&] { m.register_parameter("scale", ones({1})); },
               "register_parameter: Scaled already has a parameter, buffer or module named \"scale\"");
  expect_error([&] { m.register_buffer("fc", ones({1})); }, "already has a parameter, buffer or module named \"fc\"");
  expect_error([&] { m.register_module("a.b", std::make_shared<ReLU>()); }, "contain no '.', got \"a.b\"");
  expect_error([&] { m.register_parameter("", ones({1})); }, "a name must be non-empty");
  expect_error([&] { m.register_parameter("steps", zeros({1}, TensorOptions().dtype(DType::i64))); },
               "must be floating point to be learned, got i64 (use register_buffer");
  expect_error([&] { m.register_module("none", std::shared_ptr<ReLU>()); }, "module \"none\" of Scaled is null");
}

TEST(Module, TrainAndEvalReachEveryDescendant) {
  auto net = nested();
  auto inner = std::dynamic_pointer_cast<Sequential>((*net)[1]);
  auto scaled = (*inner)[1];
  EXPECT_TRUE(net->is_training() && inner->is_training() && scaled->is_training());
  net->eval();
  EXPECT_FALSE(net->is_training() || inner->is_training() || scaled->is_training());
  // Setting a subtree leaves the parent alone.
  inner->train();
  EXPECT_FALSE(net->is_training());
  EXPECT_TRUE(inner->is_training() && scaled->is_training());
  net->train(true);
  EXPECT_TRUE((*net)[0]->is_training());
}

TEST(Module, ZeroGradSetsToNoneOrZero) {
  auto net = nested();
  const Tensor x = rand({5, 4});
  sum((*net)(x)).backward();
  for (const Tensor& p : net->parameters()) ASSERT_TRUE(p.grad().defined());
  EXPECT_NE(sum(net->parameters()[0].grad().detach() * net->parameters()[0].grad().detach()).item(), 0.0);

  net->zero_grad(false);
  for (const Tensor& p : net->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(sum(p.grad() * p.grad()).item(), 0.0);
  }
  net->zero_grad();  // set_to_none, PyTorch 2's default
  for (const Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, ToDTypeIsInPlaceAndKeepsHandles) {
  auto lin = std::make_shared<Linear>(2, 3);
  auto bn = std::make_shared<BatchNorm2d>(3);
  Sequential net(lin, bn);
  const std::vector<Tensor> params = net.parameters();
  const std::vector<Tensor> buffers = net.buffers();
  const std::vector<float> weight_before = values(lin->weight);
  sum((*lin)(rand({4, 2}))).backward();

  net.to(DType::f64);
  // Same tensor objects (an optimiser built before still holds them), new dtype, same values.
  const std::vector<Tensor> params_after = net.parameters();
  ASSERT_EQ(params_after.size(), 4u);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params_after[i].is_same(params[i]));
    EXPECT_EQ(params[i].dtype(), DType::f64);
    EXPECT_TRUE(params[i].requires_grad());
  }
  EXPECT_EQ(values(lin->weight), weight_before);
  // The gradient moved along; the integer buffer kept its type.
  ASSERT_TRUE(lin->weight.grad().defined());
  EXPECT_EQ(lin->weight.grad().dtype(), DType::f64);
  EXPECT_TRUE(bn->running_mean.is_same(buffers[0]));
  EXPECT_EQ(bn->running_mean.dtype(), DType::f64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::i64);
  // The layers still run, now in f64.
  EXPECT_EQ((*lin)(rand({4, 2}, TensorOptions().dtype(DType::f64))).dtype(), DType::f64);
  EXPECT_EQ((*bn)(rand({2, 3, 2, 2}, TensorOptions().dtype(DType::f64))).dtype(), DType::f64);

  expect_error([&] { net.to(DType::i64); }, "Module::to: expected a floating-point dtype (f32, f64, f16 or bf16), got i64");
}

TEST(Module, ToTheSameDeviceChangesNothing) {
  Linear lin(2, 2);
  sum(lin(ones({1, 2}))).backward();
  const Tensor grad = lin.weight.grad();
  const void* data = lin.weight.data();
  EXPECT_EQ(&lin.to(Device::cpu()), &lin);
  EXPECT_EQ(lin.weight.data(), data);
  EXPECT_TRUE(lin.weight.grad().is_same(grad));
}

TEST(Module, ToCudaMovesInPlace) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Linear lin(2, 3);
  const Tensor weight = lin.weight;
  const std::vector<float> before = values(weight);
  lin.to(Device::cuda(0));
  EXPECT_TRUE(lin.parameters()[0].is_same(weight));
  EXPECT_EQ(weight.device(), Device::cuda(0));
  EXPECT_EQ(lin.bias.device(), Device::cuda(0));
  lin.to(Device::cpu());
  EXPECT_EQ(values(weight), before);
}

TEST(Module, StateDictSharesTheModulesMemory) {
  auto net = nested();
  const StateDict state = net->state_dict();
  const auto params = net->named_parameters();
  // Detached like PyTorch's (so it can be written without NoGradGuard), same memory.
  EXPECT_FALSE(state[0].second.requires_grad());
  EXPECT_EQ(state[0].second.data(), params[0].second.data());
  state[0].second.fill_(3.0);
  EXPECT_EQ(values(params[0].second), std::vector<float>(12, 3.0f));
}

TEST(Module, LoadStateDictRoundTrip) {
  manual_seed(1);
  auto source = nested();
  manual_seed(2);
  auto target = nested();
  const Tensor target_weight = target->parameters()[0];
  ASSERT_NE(values(target_weight), values(source->parameters()[0]));
  std::dynamic_pointer_cast<Scaled>((*std::dynamic_pointer_cast<Sequential>((*source)[1]))[1])->count.fill_(7);

  const IncompatibleKeys result = target->load_state_dict(source->state_dict());
  EXPECT_TRUE(result.missing_keys.empty() && result.unexpected_keys.empty());
  const StateDict a = source->state_dict(), b = target->state_dict();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(values(b[i].second), values(a[i].second)) << a[i].first;
    EXPECT_NE(b[i].second.data(), a[i].second.data()) << "values are copied, not shared";
  }
  EXPECT_EQ(b[3].second.item<int64_t>(), 7);  // 1.1.count, an i64 buffer
  // Copied in place: the target's own tensor objects received the values.
  EXPECT_TRUE(target->parameters()[0].is_same(target_weight));
}

TEST(Module, LoadStateDictConvertsDtypes) {
  Linear f32(2, 2);
  Linear f64(2, 2);
  f64.to(DType::f64);
  {
    NoGradGuard no_grad;
    f64.weight.fill_(0.25);
  }
  f32.load_state_dict(f64.state_dict());
  EXPECT_EQ(f32.weight.dtype(), DType::f32);
  EXPECT_EQ(values(f32.weight), std::vector<float>(4, 0.25f));
}

TEST(Module, LoadStateDictStrictNamesMissingAndUnexpectedKeys) {
  Sequential net(std::make_shared<Linear>(2, 2));
  const Tensor before = net.parameters()[0].clone();
  const StateDict wrong = {{"0.weight", zeros({2, 2})}, {"0.b", zeros({2})}};
  // The same text as PyTorch's:
  // Error(s) in loading state_dict for Sequential:
  //     Missing key(s) in state_dict: "0.bias".
  //     Unexpected key(s) in state_dict: "0.b".
  expect_error([&] { net.load_state_dict(wrong); },
               "load_state_dict: Error(s) in loading state_dict for Sequential:\n"
               "\tMissing key(s) in state_dict: \"0.bias\".\n"
               "\tUnexpected key(s) in state_dict: \"0.b\".");
  // A failed load copies nothing, not even the key that matched.
  EXPECT_EQ(values(net.parameters()[0]), values(before));

  // Without strict the mismatches are returned and the matching keys are loaded.
  const IncompatibleKeys result = net.load_state_dict(wrong, false);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"0.bias"}));
  EXPECT_EQ(result.unexpected_keys, (std::vector<std::string>{"0.b"}));
  EXPECT_EQ(values(net.parameters()[0]), std::vector<float>(4, 0.0f));
}

TEST(Module, LoadStateDictRejectsWrongShapesAndKinds) {
  Sequential net(std::make_shared<Linear>(2, 2));
  StateDict state = net.state_dict();
  state[0].second = zeros({2, 3});
  expect_error([&] { net.load_state_dict(state, false); },
               "size mismatch for 0.weight: copying a param with shape [2, 3] from checkpoint, the shape in current "
               "model is [2, 2].");

  BatchNorm2d bn(2);
  StateDict bn_state = bn.state_dict();
  bn_state[4].second = zeros({});  // num_batches_tracked as f32
  expect_error([&] { bn.load_state_dict(bn_state); },
               "dtype mismatch for num_batches_tracked: cannot copy a f32 tensor into the model's i64 one.");
}

// register_forward_pre_hook and register_forward_hook: run by operator() in registration order,
// each forward hook given the output the previous one returned; forward() alone runs none.
TEST(Module, ForwardHooksRunAroundForwardInOrder) {
  Linear layer(2, 2);
  std::vector<std::string> calls;
  const HookHandle pre = layer.register_forward_pre_hook([&](Module& m, const Tensor& input) {
    calls.push_back("pre " + m.name() + " " + shape_str(input.shape()));
  });
  layer.register_forward_hook([&](Module&, const Tensor&, const Tensor& output) {
    calls.push_back("double");
    return output * 2.0;
  });
  layer.register_forward_hook([&](Module&, const Tensor& input, const Tensor& output) {
    // The output the first hook returned: twice forward's.
    EXPECT_EQ(values(output), values(layer.forward(input) * 2.0));
    calls.push_back("check");
    return output;
  });
  const Tensor x = ones({1, 2});
  const Tensor y = layer(x);
  EXPECT_EQ(calls, (std::vector<std::string>{"pre Linear [1, 2]", "double", "check"}));
  EXPECT_EQ(values(y), values(layer.forward(x) * 2.0));
  calls.clear();
  layer.remove_forward_hook(pre);
  (void)layer(x);
  EXPECT_EQ(calls, (std::vector<std::string>{"double", "check"}));
  expect_error([&] { layer.remove_forward_hook(pre); }, "Linear has no forward hook with handle");
}

TEST(Module, PrintsLikePyTorch) {
  // print(nn.Sequential(nn.Linear(4, 3), nn.Sequential(nn.ReLU(), Scaled())))
  EXPECT_EQ(nested()->str(),
            "Sequential(\n"
            "  (0): Linear(in_features=4, out_features=3, bias=True)\n"
            "  (1): Sequential(\n"
            "    (0): ReLU()\n"
            "    (1): Scaled(\n"
            "      (fc): Linear(in_features=3, out_features=2, bias=True)\n"
            "    )\n"
            "  )\n"
            ")");
  EXPECT_EQ(Sequential().str(), "Sequential()");
  // print(nn.Dropout(), nn.BatchNorm2d(3, eps=1e-3, momentum=0.25), nn.Conv2d(3, 4, 5, stride=2, padding=1),
  //       nn.Flatten(2), nn.Linear(3, 2, bias=False), nn.MaxPool2d(3, 1, 1))
  EXPECT_EQ(Dropout().str(), "Dropout(p=0.5, inplace=False)");
  EXPECT_EQ(BatchNorm2d(3, 1e-3, 0.25).str(),
            "BatchNorm2d(3, eps=0.001, momentum=0.25, affine=True, track_running_stats=True)");
  EXPECT_EQ(BatchNorm2d(16).str(), "BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  EXPECT_EQ(Conv2d(Conv2dOptions(3, 4, 5).stride(2).padding(1)).str(), "Conv2d(3, 4, kernel_size=(5, 5), stride=(2, 2), padding=(1, 1))");
  EXPECT_EQ(Flatten(2).str(), "Flatten(start_dim=2, end_dim=-1)");
  EXPECT_EQ(Linear(3, 2, false).str(), "Linear(in_features=3, out_features=2, bias=False)");
  EXPECT_EQ(MaxPool2d(3, 1, 1).str(), "MaxPool2d(kernel_size=3, stride=1, padding=1, dilation=1, ceil_mode=False)");
  // Python's float repr for other values: 1.0, 0.3, 1e+16, 123.25.
  EXPECT_EQ(Dropout(1.0).str(), "Dropout(p=1.0, inplace=False)");
  EXPECT_EQ(Dropout(0.3).str(), "Dropout(p=0.3, inplace=False)");
  EXPECT_EQ(BatchNorm2d(1, 1e16, 123.25).str(),
            "BatchNorm2d(1, eps=1e+16, momentum=123.25, affine=True, track_running_stats=True)");
}
