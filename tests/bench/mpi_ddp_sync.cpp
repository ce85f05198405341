/// \file
/// Benchmark of DDP's gradient synchronisation, run under mpirun (make bench-ddp runs it):
///
///     mpirun -n 2 ./build/tests/mpi_ddp_sync
///
/// Two questions, each answered by a ratio measured in the same run:
///
/// 1. What do DDP's buckets cost over the plainest possible exchange? For a model of 16 MiB (a
///    stack of 1024 x 1024 Linear layers), `bucketed/raw` compares the all-reduces DDP issues
///    (one per bucket, started asynchronously in bucket order through the process group's
///    worker thread, then waited for) with one raw MPI_Allreduce of the same bytes. Near 1: the
///    buckets and the asynchronous machinery cost little beyond the communication itself.
///    `ddp_sync/raw` adds what else DDP does per step: copying each gradient into its bucket,
///    dividing by the world size, copying the averages back: three passes over memory. It is
///    measured as the time a synchronised forward+backward (on one sample, so backward is
///    nearly free) adds over one inside no_sync(). `ddp_sync_as_bucket_view/raw` is the same
///    with gradient_as_bucket_view and zero_grad(false): only the division is left.
///
/// 2. How much communication does overlap hide? For the chapter's CNN on a real batch, the
///    backward pass is timed with and without synchronisation, with one bucket (the default:
///    the CNN fits in the first 1 MiB bucket, so its one all-reduce starts when backward ends)
///    and with small buckets that start during backward. `hidden` is the share of the raw
///    all-reduce time that did not add to the backward time.
///
/// Every time is the slowest rank's (max over ranks), median of many repetitions.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "lockstep.h"
#include "util/timer.h"

using namespace lockstep;

namespace {

// Median over `reps` runs of `fn`, each timed on every rank after a barrier, slowest rank's.
double median_seconds(int reps, const std::function<void()>& fn) {
  std::vector<double> times;
  for (int r = 0; r < reps + 3; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    Timer timer;
    fn();
    double mine = timer.seconds(), slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (r >= 3) times.push_back(slowest);  // the first three warm up
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One MPI_Allreduce of `numel` floats, straight from MPI.
double raw_allreduce_seconds(int64_t numel, int reps) {
  std::vector<float> buffer(numel, 1.0f);
  return median_seconds(reps, [&] {
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(numel), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
}

// One forward + backward of `ddp` on (x, y), synchronised or inside no_sync(), after
// zero_grad(set_to_none).
void step(DistributedDataParallel& ddp, const Tensor& x, const Tensor& y, bool sync, bool set_to_none) {
  ddp.zero_grad(set_to_none);
  if (sync) {
    cross_entropy(ddp(x), y).backward();
  } else {
    auto guard = ddp.no_sync();
    cross_entropy(ddp(x), y).backward();
  }
}

// Median times of a local and a synchronised step, measured alternately so that drifts of the
// machine's speed affect both alike.
std::pair<double, double> local_and_synced_seconds(DistributedDataParallel& ddp, const Tensor& x, const Tensor& y,
                                                   int reps, bool set_to_none = true) {
  std::vector<double> local, synced;
  for (int r = 0; r < reps; ++r) {
    local.push_back(median_seconds(1, [&] { step(ddp, x, y, false, set_to_none); }));
    synced.push_back(median_seconds(1, [&] { step(ddp, x, y, true, set_to_none); }));
  }
  std::sort(local.begin(), local.end());
  std::sort(synced.begin(), synced.end());
  return {local[reps / 2], synced[reps / 2]};
}

// The all-reduces DDP issues for its buckets, alone: one per bucket, in order, then waited for.
double bucketed_allreduce_seconds(ProcessGroup& group, const std::vector<BucketSummary>& buckets, int reps) {
  std::vector<Tensor> flats;
  for (const BucketSummary& b : buckets) flats.push_back(ones({b.bytes / 4}));
  return median_seconds(reps, [&] {
    std::vector<std::shared_ptr<Work>> works;
    for (const Tensor& flat : flats) works.push_back(group.all_reduce_async(flat));
    for (const auto& work : works) work->wait();
  });
}

// A model of 16 MiB: four 1024 x 1024 Linear layers.
std::shared_ptr<Module> sixteen_mib_model() {
  auto model = std::make_shared<Sequential>();
  for (int i = 0; i < 4; ++i) model->push_back(std::make_shared<Linear>(1024, 1024));
  return model;
}

void bucket_cost(ProcessGroup& group) {
  std::shared_ptr<Module> model = sixteen_mib_model();
  DistributedDataParallel ddp(model);
  const Tensor x = randn({1, 1024});
  const Tensor y = zeros({1}, TensorOptions().dtype(DType::i64));
  const int reps = 30;
  const auto [local, synced] = local_and_synced_seconds(ddp, x, y, reps);
  const double bucketed = bucketed_allreduce_seconds(group, ddp.buckets(), reps);
  const double raw = raw_allreduce_seconds(model->num_parameters(), reps);
  // The same with the gradients as views of the buckets, zeroed in place (zero_grad(false)):
  // backward accumulates into the buckets, and nothing is copied in or back.
  DistributedDataParallel viewed(sixteen_mib_model(), DistributedDataParallelOptions().gradient_as_bucket_view(true));
  const auto [view_local, view_synced] = local_and_synced_seconds(viewed, x, y, reps, /*set_to_none=*/false);
  if (group.rank() == 0) {
    std::printf("BENCH bucket_cost world=%d bytes=%lld buckets=%zu raw_allreduce_ms=%.3f bucketed_allreduce_ms=%.3f "
                "bucketed/raw=%.3f ddp_sync_ms=%.3f ddp_sync/raw=%.3f ddp_sync_as_bucket_view_ms=%.3f "
                "ddp_sync_as_bucket_view/raw=%.3f\n",
                group.size(), static_cast<long long>(model->num_parameters() * 4), ddp.buckets().size(), raw * 1e3,
                bucketed * 1e3, bucketed / raw, (synced - local) * 1e3, (synced - local) / raw,
                (view_synced - view_local) * 1e3, (view_synced - view_local) / raw);
  }
}

void overlap(ProcessGroup& group, double first_bucket_mb, double bucket_mb, const char* label) {
  manual_seed(1);
  std::shared_ptr<Module> model = make_model("cnn");
  DistributedDataParallel ddp(model,
                              DistributedDataParallelOptions().first_bucket_cap_mb(first_bucket_mb).bucket_cap_mb(bucket_mb));
  Generator gen(2);
  const Tensor x = randn({64, 1, 28, 28}, {}, &gen);
  std::vector<int64_t> labels(64);
  for (int64_t& label : labels) label = static_cast<int64_t>(gen.below(10));
  const Tensor y = from_vector(labels, {64});
  const int reps = 40;
  const auto [local, synced] = local_and_synced_seconds(ddp, x, y, reps);
  const double raw = raw_allreduce_seconds(model->num_parameters(), reps);
  if (group.rank() == 0) {
    std::printf("BENCH overlap %s world=%d buckets=%zu local_step_ms=%.3f synced_step_ms=%.3f added_ms=%.3f "
                "raw_allreduce_ms=%.3f hidden=%.0f%%\n",
                label, group.size(), ddp.buckets().size(), local * 1e3, synced * 1e3, (synced - local) * 1e3, raw * 1e3,
                100.0 * std::max(0.0, 1.0 - (synced - local) / raw));
  }
}

}  // namespace

int main() {
  ProcessGroup& group = *init_process_group("mpi");
  set_num_threads(1);
  bucket_cost(group);
  overlap(group, 1.0, 25.0, "one_bucket");
  overlap(group, 0.1, 0.1, "small_buckets");
  destroy_process_group();
  return 0;
}
