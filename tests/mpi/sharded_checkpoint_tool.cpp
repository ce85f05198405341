// Sharded checkpoints from the command line, for the tests of tests/mpi/sharded_roundtrip.cmake:
// under mpirun -n N it builds a model sharded with fully_shard (each block a unit, then the
// root), trains it --steps steps with Adam on made-up batches, or loads --load DIR instead,
// prints the whole model's weights checksum, and saves --save DIR. With --compare A B (one
// rank) it compares two checkpoints' tensors, file by file, bit for bit.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/distributed_evaluation.h"
#include "common/program.h"
#include "lockstep.h"

using namespace lockstep;

namespace {

// Every tensor of every file of two checkpoint folders, bit for bit (the metadata, which holds
// each save's id, left aside).
int compare(const std::string& a, const std::string& b) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(a)) {
    const std::string name = entry.path().filename().string();
    const StateDict left = load_safetensors(a + "/" + name), right = load_safetensors(b + "/" + name);
    LOCKSTEP_CHECK(left.size() == right.size(), name, " holds ", left.size(), " tensors in ", a, " but ", right.size(),
                   " in ", b);
    for (size_t i = 0; i < left.size(); ++i) {
      LOCKSTEP_CHECK(left[i].first == right[i].first && tensor_checksum(left[i].second) == tensor_checksum(right[i].second),
                     name, ": \"", left[i].first, "\" differs between ", a, " and ", b);
    }
    ++files;
  }
  std::printf("the %zu files of %s and %s hold the same tensors, bit for bit\n", files, a.c_str(), b.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Save, reshard and load FSDP's sharded checkpoints (run with mpirun -n N)");
  std::string model_name = "resnet", save, load;
  std::vector<std::string> compared;
  int steps = 2;
  app.add_option("--model", model_name, "resnet or mlp");
  app.add_option("--steps", steps, "Adam steps before saving (when not loading)");
  app.add_option("--save", save, "save the sharded checkpoint into this folder");
  app.add_option("--load", load, "load this sharded checkpoint instead of training");
  app.add_option("--compare", compared, "two checkpoint folders to compare (one rank)")->expected(2);
  return run_program(app, argc, argv, [&] {
    if (!compared.empty()) return compare(compared[0], compared[1]);
    init_process_group("mpi");
    ProcessGroup& group = default_process_group();
    manual_seed(4);
    const std::shared_ptr<Module> model = model_name == "mlp" ? make_model("mlp") : make_model("resnet", 3);
    for (const auto& [name, child] : model->named_children()) {
      if (name.rfind("layer", 0) == 0 || (model_name == "mlp" && child->num_parameters() > 0)) fully_shard(child);
    }
    const std::shared_ptr<FSDPModule> root = fully_shard(model);
    Adam optimizer(root->parameters(), AdamOptions(0.01));
    ShardedTrainingPosition position;
    position.batch_size = 4;
    if (!load.empty()) {
      const ShardedResumeInfo info = load_sharded_checkpoint(load, *root, optimizer, group);
      position = info.saved;
      for (const std::string& note : info.notes) log_rank(note);
    } else {
      for (int step = 0; step < steps; ++step) {
        Generator gen(100 + step * group.size() + group.rank());
        const Shape shape = model_name == "mlp" ? Shape{4, 1, 28, 28} : Shape{4, 3, 16, 16};
        optimizer.zero_grad();
        cross_entropy((*model)(randn(shape, {}, &gen)), from_vector(std::vector<int64_t>{1, 2, 3, 4}, {4})).backward();
        optimizer.step();
      }
      position.step_in_epoch = position.global_step = steps;
    }
    log_rank("weights checksum " + checksum_hex(weights_checksum(*model, root->full_state_dict())));
    if (!save.empty()) save_sharded_checkpoint(save, *root, optimizer, position, group);
    destroy_process_group();
    return 0;
  });
}
