// FSDP (fully_shard) on 2 and 3 ranks against DDP with a plain optimiser, on the ResNet-8 (each
// BasicBlock a unit, then the root) and the MLP (each Linear a unit): after three steps of SGD
// with momentum and of Adam, each rank's shards of the parameters and of the optimiser's state
// are its rows of DDP's, bitwise with 2 ranks (the average of two shares does not depend on the
// order of the addition) and to rounding with 3; the same with reshard_after_forward off, with
// prefetch, with clipping and under bf16 autocast; a unit's parameters are freed between forward
// and backward and refilled without upsetting the tensors autograd saved; the full state dict is
// DDP's and loads back; a 16-bit compute policy trains; the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "../unit/test_util.h"

namespace lockstep {
namespace {

using test::group;

// Rank `rank`'s batch of step `step`: 4 images 3x16x16 (the ResNet) or 1x28x28 (the MLP).
std::pair<Tensor, Tensor> batch(const std::string& model, int step, int rank, int world) {
  Generator gen(5000 + step * world + rank);
  std::vector<int64_t> labels(4);
  for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
  const Shape shape = model == "resnet" ? Shape{4, 3, 16, 16} : Shape{4, 1, 28, 28};
  return {randn(shape, {}, &gen), from_vector(labels, {4})};
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params) {
  if (name == "adam") return std::make_unique<Adam>(std::move(params), AdamOptions(0.01));
  return std::make_unique<SGD>(std::move(params), SGDOptions(0.05).momentum(0.9));
}

// The units of `model`: its blocks (ResNet-8) or its Linear layers (MLP), then the root.
std::vector<std::shared_ptr<FSDPModule>> shard_model(const std::shared_ptr<Module>& model, const std::string& name,
                                                     FullyShardOptions options = {}) {
  std::vector<std::shared_ptr<FSDPModule>> units;
  for (const auto& [child_name, child] : model->named_children()) {
    if (name == "resnet" && child_name.rfind("layer", 0) == 0) units.push_back(fully_shard(child, options));
    if (name == "mlp" && child->name() == "Linear") units.push_back(fully_shard(child, options));
  }
  units.push_back(fully_shard(model, options));
  return units;
}

// Rank `rank`'s rows of `whole`, as its shard holds them: R = ceil(rows / world) rows, zeros
// past the end.
Tensor rows_of(const Tensor& whole, int rank, int world) {
  const int64_t rows = whole.dim() == 0 ? 1 : whole.size(0);
  const int64_t per = (rows + world - 1) / world, inner = whole.numel() / rows;
  const Tensor out = zeros({per, inner});
  const int64_t begin = std::min<int64_t>(rank * per, rows), end = std::min<int64_t>(rows, begin + per);
  if (end > begin) out.slice(0, 0, end - begin).copy_(whole.reshape({rows, inner}).slice(0, begin, end));
  return out;
}

// `got` against `want` element by element: equal when `rel` is 0, else within rel * (1 + |want|).
void expect_near(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
  const std::vector<float> g = got.to(Device::cpu()).contiguous().reshape({got.numel()}).to_vector<float>();
  const std::vector<float> w = want.to(Device::cpu()).contiguous().reshape({want.numel()}).to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t k = 0; k < g.size(); ++k) {
    if (rel == 0) {
      ASSERT_EQ(g[k], w[k]) << what << ", element " << k;
    } else {
      ASSERT_NEAR(g[k], w[k], rel * (1 + std::abs(w[k]))) << what << ", element " << k;
    }
  }
}

struct Case {
  std::string model, optimizer;
  bool reshard_after_forward = true, prefetch = false, clip = false, autocast = false;
  Device device = Device::cpu();
};

std::string describe(const Case& c) {
  return c.model + "/" + c.optimizer + (c.device.is_cuda() ? "/cuda" : "") + (c.reshard_after_forward ? "" : "/keep") + (c.prefetch ? "/prefetch" : "") +
         (c.clip ? "/clip" : "") + (c.autocast ? "/bf16-autocast" : "");
}

// Three steps of FSDP and of DDP from the same weights on the same batches; then each rank's
// shards of the weights and of the optimiser's state against its rows of DDP's.
void train_against_ddp(const Case& c) {
  const int rank = group().rank(), world = group().size();
  manual_seed(31);
  const std::shared_ptr<Module> sharded = make_model(c.model);
  sharded->to(c.device);
  manual_seed(31);
  const std::shared_ptr<Module> plain_model = make_model(c.model);
  plain_model->to(c.device);
  auto ddp = std::make_shared<DistributedDataParallel>(plain_model);
  const std::vector<std::shared_ptr<FSDPModule>> units =
      shard_model(sharded, c.model, FullyShardOptions().reshard_after_forward(c.reshard_after_forward));
  const std::shared_ptr<FSDPModule>& root = units.back();
  if (c.prefetch) {
    // Each unit fetches the next one's parameters in forward and the previous one's in backward.
    for (size_t i = 0; i + 1 < units.size() - 1; ++i) {
      units[i]->set_modules_to_forward_prefetch({units[i + 1]});
      units[i + 1]->set_modules_to_backward_prefetch({units[i]});
    }
  }
  const std::unique_ptr<Optimizer> fsdp_opt = make_optimizer(c.optimizer, root->parameters());
  const std::unique_ptr<Optimizer> ddp_opt = make_optimizer(c.optimizer, ddp->parameters());
  const std::vector<Tensor> shards = root->parameters(), plain = ddp->parameters();
  ASSERT_EQ(shards.size(), plain.size());
  // With 3 ranks the reduce-scatter and the all-reduce may add three shares in different orders.
  const double rel = world == 2 ? 0.0 : (c.optimizer == "adam" ? 1e-4 : 1e-6);
  for (int step = 0; step < 3; ++step) {
    const auto [cpu_x, cpu_y] = batch(c.model, step, rank, world);
    const Tensor x = cpu_x.to(c.device), y = cpu_y.to(c.device);
    fsdp_opt->zero_grad();
    ddp_opt->zero_grad();
    {
      const AutocastGuard autocast(DeviceType::CPU, DType::bf16, c.autocast);
      cross_entropy((*sharded)(x), y).backward();
      cross_entropy((*ddp)(x), y).backward();
    }
    // After backward only shards remain: no whole gradient, no whole parameter.
    for (const Tensor& p : sharded->parameters()) {
      ASSERT_FALSE(p.grad().defined()) << describe(c);
      ASSERT_EQ(p.storage()->nbytes(), 0u) << describe(c) << ": a whole parameter still holds memory";
    }
    for (size_t i = 0; i < plain.size(); ++i) {
      expect_near(shards[i].grad(), rows_of(plain[i].grad().to(Device::cpu()), rank, world), rel,
                  describe(c) + ", step " + std::to_string(step) + ", gradient shard " + std::to_string(i));
    }
    if (c.clip) {
      const double fsdp_norm = root->clip_grad_norm_(0.5);
      const double ddp_norm = clip_grad_norm_(plain, 0.5);
      ASSERT_GT(ddp_norm, 0.5) << "the test needs gradients the clipping changes";
      // Both sum the same squares in f64, in other orders: rounding of the f64 sum alone.
      ASSERT_NEAR(fsdp_norm, ddp_norm, 1e-12 * ddp_norm) << describe(c);
    }
    fsdp_opt->step();
    ddp_opt->step();
  }
  // Clipping scales by a factor computed from a differently rounded norm: one rounding more.
  const double rel_end = c.clip && rel == 0 ? 1e-6 : rel;
  for (size_t i = 0; i < plain.size(); ++i) {
    expect_near(shards[i], rows_of(plain[i].to(Device::cpu()), rank, world), rel_end,
                describe(c) + ", parameter " + std::to_string(i));
  }
  const OptimizerStateDict got = fsdp_opt->state_dict(), want = ddp_opt->state_dict();
  ASSERT_EQ(got.state.size(), want.state.size());
  for (size_t k = 0; k < want.state.size(); ++k) {
    ASSERT_EQ(got.state[k].first, want.state[k].first);
    const Tensor state = want.state[k].second.to(Device::cpu());
    const Tensor expected = state.dim() == 0 ? state : rows_of(state, rank, world);
    expect_near(got.state[k].second, expected, rel_end, describe(c) + ", optimiser state " + want.state[k].first);
  }
}

TEST(FullyShard, TrainsAsDdpWithSgdMomentum) { train_against_ddp({"resnet", "sgd"}); }
TEST(FullyShard, TrainsAsDdpWithAdam) { train_against_ddp({"resnet", "adam"}); }
TEST(FullyShard, TrainsAsDdpOnTheMlp) { train_against_ddp({"mlp", "adam"}); }
TEST(FullyShard, TrainsAsDdpWithoutReshardingAfterForward) { train_against_ddp({"resnet", "adam", false}); }
TEST(FullyShard, TrainsAsDdpWithPrefetch) { train_against_ddp({"resnet", "adam", true, true}); }
TEST(FullyShard, TrainsAsDdpWithGradientClipping) { train_against_ddp({"resnet", "sgd", true, true, true}); }
TEST(FullyShard, TrainsAsDdpUnderBf16Autocast) { train_against_ddp({"resnet", "adam", true, false, false, true}); }

// On a GPU: parameters, shards and collectives of CUDA tensors (over MPI staging here; make
// gpu-check runs it with two ranks sharing one GPU). Skipped, on every rank together, without one.
TEST(FullyShard, TrainsAsDdpOnAGpu) {
  const Tensor no_gpu_somewhere = full({1}, cuda_device_count() > 0 ? 0 : 1, TensorOptions().dtype(DType::i32));
  group().all_reduce(no_gpu_somewhere, ReduceOp::Max);
  if (no_gpu_somewhere.item<int32_t>() == 1) GTEST_SKIP() << "needs a CUDA device on every rank's machine";
  Case c{"resnet", "adam"};
  c.device = Device::cuda(mpi::node_rank_and_size().first % cuda_device_count());
  train_against_ddp(c);
}

TEST(FullyShard, FreesParametersBetweenForwardAndBackwardAndRefillsWhatAutogradSaved) {
  manual_seed(5);
  const std::shared_ptr<Module> model = make_model("resnet");
  const auto units = shard_model(model, "resnet");
  std::shared_ptr<Module> block;
  for (const auto& [name, child] : model->named_children()) {
    if (name == "layer1") block = child;
  }
  ASSERT_NE(block, nullptr);
  const Tensor weight = block->parameters().front();
  // Before forward: a shape, no memory; reading it is an error that says why.
  EXPECT_EQ(weight.storage()->nbytes(), 0u);
  test::expect_error([&] { (void)weight.to_vector<float>(); }, "tensor has been freed (FSDP frees");
  const int64_t version = weight.version();
  const auto [x, y] = batch("resnet", 0, group().rank(), group().size());
  const Tensor loss = cross_entropy((*model)(x), y);
  // After forward a block's parameters are freed again, though its saved tensors need them...
  EXPECT_EQ(weight.storage()->nbytes(), 0u);
  // ... and backward gathers them back into the same storage, at the version autograd saved:
  // no "modified by an in-place operation" error.
  loss.backward();
  EXPECT_EQ(weight.version(), version);
  for (const Tensor& shard : units.back()->parameters()) EXPECT_TRUE(shard.grad().defined());
}

TEST(FullyShard, FullStateDictIsTheUnshardedModelsAndLoadsBack) {
  const int rank = group().rank(), world = group().size();
  manual_seed(8);
  const std::shared_ptr<Module> model = make_model("resnet");
  manual_seed(8);
  const std::shared_ptr<Module> plain = make_model("resnet");
  const auto units = shard_model(model, "resnet");
  const StateDict full = units.back()->full_state_dict(), want = plain->state_dict();
  ASSERT_EQ(full.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(full[i].first, want[i].first);
    if (want[i].second.dtype() == DType::f32) expect_near(full[i].second, want[i].second, 0.0, want[i].first);
  }
  // Another sharded model takes its shards from it, and gathers the same again.
  manual_seed(9);
  const std::shared_ptr<Module> other = make_model("resnet");
  const auto other_units = shard_model(other, "resnet");
  other_units.back()->load_full_state_dict(full);
  const std::vector<Tensor> shards = other_units.back()->parameters();
  const std::vector<Tensor> whole = plain->parameters();
  for (size_t i = 0; i < whole.size(); ++i) expect_near(shards[i], rows_of(whole[i], rank, world), 0.0, "loaded shard");
  StateDict renamed = full;
  renamed.back().first = "fc.b";
  test::expect_error([&] { other_units.back()->load_full_state_dict(renamed); },
                     "missing key(s) fc.bias. unexpected key(s) fc.b.");
}

TEST(FullyShard, SixteenBitComputePolicyTrains) {
  manual_seed(12);
  const std::shared_ptr<Module> model = make_model("mlp");
  MixedPrecisionPolicy policy;
  policy.param_dtype = DType::bf16;
  policy.reduce_dtype = DType::f32;
  const auto units = shard_model(model, "mlp", FullyShardOptions().mp_policy(policy));
  Adam opt(units.back()->parameters(), AdamOptions(0.01));
  const auto [x, y] = batch("mlp", 0, group().rank(), group().size());
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    const Tensor loss = cross_entropy((*model)(x.to(DType::bf16)).to(DType::f32), y);
    loss.backward();
    // The whole parameters compute in bf16; the master shards and their gradients stay f32.
    EXPECT_EQ(model->parameters().front().dtype(), DType::bf16);
    EXPECT_EQ(units.back()->parameters().front().grad().dtype(), DType::f32);
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, first) << "five steps on one batch should lower its loss";
}

// The memory ledger after a FSDP step with Adam: parameters, gradients and optimiser state each a
// shard (4, 4 and 8 bytes per element of this rank's shards, plus Adam's 4-byte step count per
// parameter), no whole parameter left, the model state within 5% of (4+4+8)Ψ/N; the categories
// add up to the allocator's count in the middle of forward and after the step. The
// communication ledger of the step: the formula 3Ψ(N-1)/N, exactly, for the padded Ψ.
TEST(FullyShard, LedgersOfAStepMatchTheFormulas) {
  const int world = group().size();
  const MemoryLedger before = memory_ledger(Device::cpu());
  manual_seed(14);
  const std::shared_ptr<Module> model = make_model("mlp");
  const double psi = static_cast<double>(model->num_parameters());
  const auto units = shard_model(model, "mlp");
  bool checked_in_forward = false;
  model->register_forward_hook([&](Module&, const Tensor&, const Tensor& output) {
    const MemoryLedger now = memory_ledger(Device::cpu());
    int64_t sum = 0;
    for (int64_t bytes : now.current) sum += bytes;
    EXPECT_EQ(sum, now.total);
    EXPECT_EQ(now.total, cpu_memory_stats().allocated_bytes) << "in forward";
    EXPECT_GT(now[MemoryCategory::activations_and_other], before[MemoryCategory::activations_and_other]);
    checked_in_forward = true;
    return output;
  });
  Adam opt(units.back()->parameters(), AdamOptions(0.01));
  int64_t shard_elements = 0;
  for (const Tensor& shard : units.back()->parameters()) shard_elements += shard.numel();
  const auto [x, y] = batch("mlp", 0, group().rank(), world);
  group().reset_communication_ledger();
  cross_entropy((*model)(x), y).backward();
  opt.step();
  const CommunicationLedger sent = group().communication_ledger();
  EXPECT_TRUE(checked_in_forward);
  const MemoryLedger after = memory_ledger(Device::cpu());
  const auto grew = [&](MemoryCategory c) { return after[c] - before[c]; };
  const int64_t params = static_cast<int64_t>(units.back()->parameters().size());
  EXPECT_EQ(grew(MemoryCategory::parameters), 4 * shard_elements);
  EXPECT_EQ(grew(MemoryCategory::gradients), 4 * shard_elements);
  EXPECT_EQ(grew(MemoryCategory::optimizer_state), 8 * shard_elements + 4 * params);
  EXPECT_EQ(grew(MemoryCategory::unsharded_parameters), 0);
  const double formula = (4 + 4 + 8) * psi / world;
  EXPECT_NEAR(static_cast<double>(after.model_state - before.model_state), formula, 0.05 * formula);
  EXPECT_EQ(after.total, cpu_memory_stats().allocated_bytes);
  // Two all-gathers of every unit's shards (forward, backward) and one reduce-scatter.
  EXPECT_EQ(sent.calls.at("all_gather"), 2 * static_cast<int64_t>(units.size() - 1));
  EXPECT_EQ(sent.calls.at("reduce_scatter"), static_cast<int64_t>(units.size() - 1));
  EXPECT_DOUBLE_EQ(sent.total_bytes(), 3.0 * 4 * static_cast<double>(shard_elements) * (world - 1));
  EXPECT_NEAR(sent.total_bytes(), 3.0 * 4 * psi * (world - 1) / world, 0.05 * 3.0 * 4 * psi * (world - 1) / world);
}

// DDP's step sends its gradients once through the ring: 2Ψ(N-1)/N elements.
TEST(FullyShard, DdpsStepSendsTwicePsi) {
  const int world = group().size();
  auto ddp = std::make_shared<DistributedDataParallel>(make_model("mlp"));
  const double psi = static_cast<double>(ddp->module().num_parameters());
  const auto [x, y] = batch("mlp", 0, group().rank(), world);
  group().reset_communication_ledger();
  cross_entropy((*ddp)(x), y).backward();
  EXPECT_DOUBLE_EQ(group().communication_ledger().total_bytes(), 2.0 * 4 * psi * (world - 1) / world);
}

TEST(FullyShard, ErrorsSayWhatIsWrong) {
  using test::expect_error;
  const std::shared_ptr<Module> model = make_model("mlp");
  const auto unit = fully_shard(model);
  expect_error([&] { (void)fully_shard(model); }, "is already a unit of FSDP");
  const std::shared_ptr<Module> wide = make_model("mlp");
  wide->to(DType::f64);
  expect_error([&] { (void)fully_shard(wide); }, "shards are the f32 master weights");
  // Ranks that built different models would cut different shards: every rank says which.
  const std::shared_ptr<Module> differs = std::make_shared<Linear>(4, group().rank() == 1 ? 3 : 2);
  expect_error([&] { (void)fully_shard(differs); }, "differs in shape between rank 0 and rank(s) 1");
}

}  // namespace
}  // namespace lockstep
