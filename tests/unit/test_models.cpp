// The chapter models: parameter counts, state_dict keys and printed structure identical to the
// PyTorch definitions in nn/models.h, outputs identical to PyTorch's for the same weights,
// forward shapes, and a short training run that must drive the loss down.
//
// Every expected key list, string and number below was produced by PyTorch 1.13 (Debian's
// python3-torch) from the definitions quoted in nn/models.h.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/flop_count.h"
#include "lockstep.h"
#include "nn/loss.h"
#include "nn/models.h"
#include "nn/resnet50.h"
#include "nn/module.h"
#include "test_util.h"

using namespace lockstep;
using namespace lockstep::test;

namespace {

std::vector<std::string> keys_of(const StateDict& state) {
  std::vector<std::string> keys;
  for (const auto& entry : state) keys.push_back(entry.first);
  return keys;
}

// Fills every floating-point entry k of the state dict with 0.5 sin(0.37 i + 1.3 k) (running
// variances with 1 + that squared, to stay positive), exactly as the Python that produced the
// expected outputs did:
//     k = 0
//     for key, t in model.state_dict().items():
//         if not t.is_floating_point(): continue
//         v = torch.tensor([0.5*math.sin(0.37*i + 1.3*k) for i in range(t.numel())], dtype=torch.float64)
//         if key.endswith("running_var"): v = 1 + v*v
//         t.copy_(v.reshape(t.shape)); k += 1
void fill_deterministic(Module& model) {
  NoGradGuard no_grad;
  int k = 0;
  for (const auto& [key, t] : model.state_dict()) {
    if (!is_floating(t.dtype())) continue;
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * std::sin(0.37 * static_cast<double>(i) + 1.3 * k);
    if (key.size() >= 11 && key.compare(key.size() - 11, 11, "running_var") == 0) {
      for (double& x : v) x = 1 + x * x;
    }
    t.copy_(from_vector(v, t.shape(), TensorOptions().dtype(DType::f64)));
    ++k;
  }
}

// The input of the same Python: x[i] = sin(0.11 i) in row-major order.
Tensor deterministic_input(const Shape& shape) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.11 * static_cast<double>(i));
  return from_vector(v, shape, TensorOptions().dtype(DType::f64));
}

void expect_close(const Tensor& actual, const std::vector<double>& expected) {
  const std::vector<double> got = actual.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  // PyTorch's values were printed with 12 significant digits.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-9 * (1 + std::fabs(expected[i]))) << i;
}

}  // namespace

TEST(Models, ParameterCountsMatchPyTorch) {
  EXPECT_EQ(make_model("mlp")->num_parameters(), 235146);
  EXPECT_EQ(make_model("cnn")->num_parameters(), 225034);
  EXPECT_EQ(make_model("resnet")->num_parameters(), 78042);
}

TEST(Models, StateDictKeysMatchPyTorch) {
  EXPECT_EQ(keys_of(make_model("mlp")->state_dict()),
            (std::vector<std::string>{"1.weight", "1.bias", "3.weight", "3.bias", "5.weight", "5.bias"}));
  EXPECT_EQ(keys_of(make_model("cnn")->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight",
                                      "9.bias"}));
  const std::vector<std::string> resnet_keys = {
      "conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
      "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.bn1.running_mean",
      "layer1.0.bn1.running_var", "layer1.0.bn1.num_batches_tracked", "layer1.0.conv2.weight", "layer1.0.bn2.weight",
      "layer1.0.bn2.bias", "layer1.0.bn2.running_mean", "layer1.0.bn2.running_var", "layer1.0.bn2.num_batches_tracked",
      "layer2.0.conv1.weight", "layer2.0.bn1.weight", "layer2.0.bn1.bias", "layer2.0.bn1.running_mean",
      "layer2.0.bn1.running_var", "layer2.0.bn1.num_batches_tracked", "layer2.0.conv2.weight", "layer2.0.bn2.weight",
      "layer2.0.bn2.bias", "layer2.0.bn2.running_mean", "layer2.0.bn2.running_var", "layer2.0.bn2.num_batches_tracked",
      "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight", "layer2.0.downsample.1.bias",
      "layer2.0.downsample.1.running_mean", "layer2.0.downsample.1.running_var",
      "layer2.0.downsample.1.num_batches_tracked", "layer3.0.conv1.weight", "layer3.0.bn1.weight", "layer3.0.bn1.bias",
      "layer3.0.bn1.running_mean", "layer3.0.bn1.running_var", "layer3.0.bn1.num_batches_tracked",
      "layer3.0.conv2.weight", "layer3.0.bn2.weight", "layer3.0.bn2.bias", "layer3.0.bn2.running_mean",
      "layer3.0.bn2.running_var", "layer3.0.bn2.num_batches_tracked", "layer3.0.downsample.0.weight",
      "layer3.0.downsample.1.weight", "layer3.0.downsample.1.bias", "layer3.0.downsample.1.running_mean",
      "layer3.0.downsample.1.running_var", "layer3.0.downsample.1.num_batches_tracked", "fc.weight", "fc.bias"};
  const StateDict resnet = make_model("resnet")->state_dict();
  EXPECT_EQ(keys_of(resnet), resnet_keys);
  // A few shapes: the 1x1 shortcut convolution and the classifier.
  EXPECT_EQ(resnet[30].second.shape(), (Shape{32, 16, 1, 1}));
  EXPECT_EQ(resnet.back().second.shape(), (Shape{10}));
  EXPECT_EQ(make_model("resnet")->buffers().size(), 27u);  // 9 BatchNorm2d x 3 buffers
}

TEST(Models, PrintLikePyTorch) {
  EXPECT_EQ(make_model("cnn")->str(),
            "Sequential(\n"
            "  (0): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))\n"
            "  (1): ReLU(inplace=True)\n"
            "  (2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (3): Conv2d(32, 64, kernel_size=(3, 3), stride=(1, 1))\n"
            "  (4): ReLU(inplace=True)\n"
            "  (5): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (6): Flatten(start_dim=1, end_dim=-1)\n"
            "  (7): Linear(in_features=1600, out_features=128, bias=True)\n"
            "  (8): ReLU(inplace=True)\n"
            "  (9): Linear(in_features=128, out_features=10, bias=True)\n"
            ")");
  const std::string bn16 = "BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)";
  const std::string bn32 = "BatchNorm2d(32, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)";
  const std::string bn64 = "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)";
  EXPECT_EQ(make_model("resnet")->str(),
            "ResNet(\n"
            "  (conv1): Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
            "  (bn1): " + bn16 + "\n"
            "  (layer1): Sequential(\n"
            "    (0): BasicBlock(\n"
            "      (conv1): Conv2d(16, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
            "      (bn1): " + bn16 + "\n"
            "      (conv2): Conv2d(16, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
            "      (bn2): " + bn16 + "\n"
            "    )\n"
            "  )\n"
            "  (layer2): Sequential(\n"
            "    (0): BasicBlock(\n"
            "      (conv1): Conv2d(16, 32, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)\n"
            "      (bn1): " + bn32 + "\n"
            "      (conv2): Conv2d(32, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
            "      (bn2): " + bn32 + "\n"
            "      (downsample): Sequential(\n"
            "        (0): Conv2d(16, 32, kernel_size=(1, 1), stride=(2, 2), bias=False)\n"
            "        (1): " + bn32 + "\n"
            "      )\n"
            "    )\n"
            "  )\n"
            "  (layer3): Sequential(\n"
            "    (0): BasicBlock(\n"
            "      (conv1): Conv2d(32, 64, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)\n"
            "      (bn1): " + bn64 + "\n"
            "      (conv2): Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
            "      (bn2): " + bn64 + "\n"
            "      (downsample): Sequential(\n"
            "        (0): Conv2d(32, 64, kernel_size=(1, 1), stride=(2, 2), bias=False)\n"
            "        (1): " + bn64 + "\n"
            "      )\n"
            "    )\n"
            "  )\n"
            "  (fc): Linear(in_features=64, out_features=10, bias=True)\n"
            ")");
}

TEST(Models, OutputsMatchPyTorchForTheSameWeights) {
  // CNN on (2, 1, 28, 28): no BatchNorm or Dropout, so train and eval agree.
  auto cnn = make_model("cnn");
  cnn->to(DType::f64);
  fill_deterministic(*cnn);
  expect_close((*cnn)(deterministic_input({2, 1, 28, 28})),
               {2.31329531899,   -0.151887244033, -2.10404873628, 3.47493656813, -5.99950788959, 6.44869608534,
                -8.44265424396,  8.16290555567,   -8.89372307128, 8.20729721718, 2.27791908367,  -0.0751029241451,
                -2.21798041578,  3.61969359318,   -6.16705776255, 6.62974154441, -8.62714916376, 8.3406124019,
                -9.05478097659,  8.34276915591});

  auto mlp = make_model("mlp");
  mlp->to(DType::f64);
  fill_deterministic(*mlp);
  expect_close((*mlp)(deterministic_input({2, 1, 28, 28})),
               {5.00579585152, -4.45547217661, 4.71250559236, -3.15131361709, 3.26343291639, -1.30498628909,
                0.949177459634, 0.693212607332, -1.67136800359, 2.48971058089, 5.05763671063, -4.60626766061,
                4.95388813241, -3.46988901224, 3.64152357131, -1.72161213532, 1.38122012951, 0.2697269536,
                -1.27993838109, 2.15205723096});

  // ResNet on (2, 3, 32, 32): a training forward (batch statistics, running stats updated),
  // then an evaluation forward with the updated running statistics.
  auto resnet = std::dynamic_pointer_cast<ResNet>(make_model("resnet"));
  ASSERT_NE(resnet, nullptr);
  resnet->to(DType::f64);
  fill_deterministic(*resnet);
  const Tensor x = deterministic_input({2, 3, 32, 32});
  expect_close((*resnet)(x),
               {-6.01739933791, -7.16898966951, 3.95270449289, 7.48828453198, -2.95361517878, -8.99844455914,
                0.0802143154865, 8.42633486747, 1.55639864854, -8.11818358505, -5.46089188449, -6.82222563239,
                3.47788151581, 7.02967018142, -2.58682437649, -8.45342818471, -0.158191266936, 7.82515916544,
                1.65319000008, -7.49420750576});
  expect_close(resnet->bn1->running_mean.slice(0, 0, 3),
               {-0.30983693506874416, -0.40659299987207814, -0.4486248751231115});
  EXPECT_EQ(resnet->bn1->num_batches_tracked.item<int64_t>(), 1);
  resnet->eval();
  expect_close((*resnet)(x),
               {-2.3844798064, -23.6961156338, -3.57338008863, 22.2425499566, 8.04801564192, -21.1611423575,
                -13.7864875457, 17.3225627931, 17.5187149385, -13.2542942325, -1.76966939626, -23.6774579846,
                -4.18379546314, 22.0801015596, 8.62016432548, -20.863917396, -14.2886212832, 16.9070541372,
                17.9229705706, -12.7435582575});
}

TEST(Models, ForwardShapesAndGradientsReachEveryParameter) {
  EXPECT_EQ((*make_model("mlp"))(rand({4, 1, 28, 28})).shape(), (Shape{4, 10}));
  EXPECT_EQ((*make_model("cnn"))(rand({4, 1, 28, 28})).shape(), (Shape{4, 10}));
  auto resnet = make_model("resnet");
  const Tensor logits = (*resnet)(rand({2, 3, 32, 32}));
  EXPECT_EQ(logits.shape(), (Shape{2, 10}));
  // Every parameter, including the shortcut convolutions, takes part in the output.
  CrossEntropyLoss()(logits, from_vector(std::vector<int64_t>{3, 7}, {2})).backward();
  for (const auto& [name, p] : resnet->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_GT(sum(p.grad() * p.grad()).item(), 0.0) << name;
  }
  // Global average pooling lets a one-channel ResNet take 28 x 28 Fashion-MNIST images.
  EXPECT_EQ(ResNet(1)(rand({2, 1, 28, 28})).shape(), (Shape{2, 10}));
}

TEST(Models, UnknownNameListsTheValidOnes) {
  EXPECT_EQ(error_message([] { make_model("vgg"); }), "make_model: unknown model 'vgg': expected mlp, cnn, resnet or resnet50");
  EXPECT_EQ(error_message([] { make_model("cnn", 3); }),
            "make_model: the cnn model takes 1-channel 28 x 28 images (Fashion-MNIST), not 3 channels; the resnet and "
            "resnet50 models take any");
}

TEST(Models, ResNetStateDictRoundTrip) {
  manual_seed(3);
  auto a = make_model("resnet");
  (*a)(rand({2, 3, 32, 32}));  // moves running statistics and num_batches_tracked away from their start
  manual_seed(4);
  auto b = make_model("resnet");
  b->load_state_dict(a->state_dict());
  a->eval();
  b->eval();
  const Tensor x = rand({2, 3, 32, 32});
  EXPECT_EQ((*a)(x).to_vector<float>(), (*b)(x).to_vector<float>());
  EXPECT_EQ(b->state_dict()[5].second.item<int64_t>(), 1);  // bn1.num_batches_tracked
}

TEST(Models, MlpLearnsRandomLabels) {
  // 64 random images with fixed random labels: the MLP can memorise them, so 50 plain SGD steps
  // (p -= lr * grad, done by hand) must cut the loss by a large factor.
  manual_seed(0);
  auto model = make_model("mlp");
  Generator data(42);
  const Tensor images = randn({64, 1, 28, 28}, {}, &data);
  std::vector<int64_t> labels(64);
  for (auto& label : labels) label = static_cast<int64_t>(data.below(10));
  const Tensor target = from_vector(labels, {64});
  CrossEntropyLoss criterion;

  const double lr = 0.1;
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 50; ++step) {
    model->zero_grad();
    const Tensor loss = criterion((*model)(images), target);
    loss.backward();
    if (step == 0) first = loss.item();
    last = loss.item();
    NoGradGuard no_grad;
    for (const Tensor& p : model->parameters()) p.add_(p.grad(), -lr);
  }
  EXPECT_NEAR(first, std::log(10.0), 0.3);  // about uniform guesses at the start
  EXPECT_LT(last, first / 10) << "first loss " << first << ", last " << last;
}

// --threads changes how fast a model trains, never what it computes: every kernel either gives
// each thread whole outputs or splits its sums at points fixed by the data alone (a
// convolution's weight gradient sums groups of images that do not depend on the thread count).
// Five SGD steps of each model in f32 with 1, 2 and 3 threads must end in the same bits.
TEST(Models, TrainingGivesTheSameBitsWithAnyThreadCount) {
  const int saved_threads = get_num_threads();
  struct Case {
    std::string model;
    Shape input;
  };
  // Batches of 24 and 12 give every thread whole images; a batch of 2 is smaller than 3
  // threads, so its groups of images run one after another with threaded GEMMs instead.
  for (const Case& c : {Case{"mlp", {24, 1, 28, 28}}, Case{"cnn", {24, 1, 28, 28}}, Case{"resnet", {12, 3, 16, 16}},
                        Case{"cnn", {2, 1, 28, 28}}}) {
    std::vector<std::vector<float>> results;  // per thread count: every parameter and buffer, in order
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      manual_seed(5);
      auto model = make_model(c.model);
      SGD sgd(model->parameters(), SGDOptions(0.05).momentum(0.9));
      Generator data(11);
      CrossEntropyLoss criterion;
      for (int step = 0; step < 5; ++step) {
        const Tensor images = randn(c.input, {}, &data);
        std::vector<int64_t> labels(static_cast<size_t>(c.input[0]));
        for (auto& label : labels) label = static_cast<int64_t>(data.below(10));
        sgd.zero_grad();
        criterion((*model)(images), from_vector(labels, {c.input[0]})).backward();
        sgd.step();
      }
      std::vector<float> values;
      for (const auto& [key, t] : model->state_dict()) {
        if (t.dtype() != DType::f32) continue;
        const std::vector<float> v = t.contiguous().to_vector<float>();
        values.insert(values.end(), v.begin(), v.end());
      }
      results.push_back(values);
    }
    for (size_t k = 1; k < results.size(); ++k) {
      ASSERT_EQ(results[k].size(), results[0].size());
      size_t differing = 0;
      for (size_t i = 0; i < results[0].size(); ++i) differing += results[k][i] != results[0][i];
      EXPECT_EQ(differing, 0u) << c.model << ": " << differing << " of " << results[0].size()
                               << " values differ between 1 and " << k + 1 << " threads";
    }
  }
  set_num_threads(saved_threads);
}

// torchvision's resnet50(num_classes=10), as tests/reference/resnet50_torchvision.py prints it
// (torch 1.13, torchvision 0.15.2): the parameter count, the state_dict's layout, the output
// shapes for CIFAR-10 and Fashion-MNIST, and the logits for fixed weights and input.
TEST(ResNet50, ParameterCountAndStateDictMatchTorchvision) {
  auto model = make_model("resnet50");
  EXPECT_EQ(model->num_parameters(), 23528522);
  EXPECT_EQ(make_model("resnet50", 1)->num_parameters(), 23522250);
  const StateDict state = model->state_dict();
  EXPECT_EQ(state.size(), 320u);
  EXPECT_EQ(model->buffers().size(), 159u);  // 53 BatchNorm2d x 3 buffers
  const std::vector<std::string> keys = keys_of(state);
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 8),
            (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
                                      "bn1.num_batches_tracked", "layer1.0.conv1.weight", "layer1.0.bn1.weight"}));
  EXPECT_EQ(keys[24], "layer1.0.downsample.0.weight");
  EXPECT_EQ(keys[30], "layer1.1.conv1.weight");
  EXPECT_EQ(std::vector<std::string>(keys.end() - 4, keys.end()),
            (std::vector<std::string>{"layer4.2.bn3.running_var", "layer4.2.bn3.num_batches_tracked", "fc.weight",
                                      "fc.bias"}));
  EXPECT_EQ(state[24].second.shape(), (Shape{256, 64, 1, 1}));
  EXPECT_EQ(state[state.size() - 2].second.shape(), (Shape{10, 2048}));
}

// The flops the library counts for ResNet-50's forward pass on one 224 x 224 image, against the
// published figure: 4.1 billion multiply-adds (He et al. 2016, table 1: "3.8 x 10^9 FLOPs" for
// the original; torchvision's v1.5, with the stride in the 3x3 convolution, lists 4.09 GFLOPS).
// Only convolutions and the fully connected layer count, as in both.
TEST(ResNet50, ForwardOnOneImageCountsTheFourBillionMultiplyAddsPublished) {
  NoGradGuard no_grad;
  ResNet50 model(3, 1000);
  const Tensor image = rand({1, 3, 224, 224});
  const int64_t before = flops_counted();
  model(image);
  const double multiply_adds = static_cast<double>(flops_counted() - before) / 2;
  EXPECT_NEAR(multiply_adds / 4.09e9, 1.0, 0.01) << multiply_adds;
}

TEST(ResNet50, OutputShapesForCifar10AndFashionMnist) {
  NoGradGuard no_grad;
  EXPECT_EQ((*make_model("resnet50", 3))(rand({2, 3, 32, 32})).shape(), (Shape{2, 10}));
  EXPECT_EQ((*make_model("resnet50", 1))(rand({2, 1, 28, 28})).shape(), (Shape{2, 10}));
}

// Evaluation mode: in training mode layer4's BatchNorm normalises 2 values per channel, which
// amplifies rounding beyond any tolerance (see the reference script).
TEST(ResNet50, LogitsMatchTorchvision) {
  auto model = make_model("resnet50");
  model->to(DType::f64);
  fill_deterministic(*model);
  model->eval();
  NoGradGuard no_grad;
  expect_close((*model)(deterministic_input({2, 3, 32, 32})),
               {2134.33854694, -1678.2796787, 566.573223602, 768.230386417, -1800.77811531, 2130.49916553,
                -1625.14950805, 485.080624261, 845.331749833, -1845.08621646, 2163.78996872, -1702.35788575,
                575.857706019, 777.372148216, -1824.76944066, 2159.95353667, -1648.54301065, 493.260636515,
                855.565627623, -1869.73001727});
}

// torchvision's initialisation: every convolution normal with std sqrt(2 / fan_out), every
// BatchNorm weight 1 and bias 0.
TEST(ResNet50, ConvolutionsStartKaimingNormalWithFanOut) {
  manual_seed(0);
  auto model = std::dynamic_pointer_cast<ResNet50>(make_model("resnet50"));
  ASSERT_NE(model, nullptr);
  // layer3.0.conv2: (256, 256, 3, 3), fan_out 256 * 9, 589,824 draws.
  const Tensor w = std::dynamic_pointer_cast<Bottleneck>(model->layer3->children()[0])->conv2->weight.to(DType::f64);
  const double mean_w = mean(w).item();
  const double std_w = std::sqrt(mean((w - mean_w) * (w - mean_w)).item());
  EXPECT_NEAR(mean_w, 0.0, 1e-3);
  EXPECT_NEAR(std_w / std::sqrt(2.0 / (256 * 9)), 1.0, 0.01);
  EXPECT_EQ(model->bn1->weight.to_vector<float>(), std::vector<float>(64, 1.0f));
  EXPECT_EQ(model->bn1->bias.to_vector<float>(), std::vector<float>(64, 0.0f));
}
