#include "data/data_loader.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "core/cuda/context.h"
#include "core/device.h"
#include "core/error.h"
#include "util/trace.h"

namespace lockstep {

// One pass over the batches of an epoch, with the worker thread that prepares them when
// prefetching. (Declared in the header only by name; Iterator points at it.)
class DataLoader::Epoch {
 public:
  Epoch(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<int64_t>> batches, int64_t prefetch,
        bool pin_memory)
      : dataset_(std::move(dataset)),
        batches_(std::move(batches)),
        capacity_(static_cast<size_t>(prefetch)),
        pin_memory_(pin_memory),
        pin_device_(pin_memory ? cuda::current_device() : Device::cpu()) {
    if (capacity_ > 0) worker_ = std::thread([this] { produce(); });
  }

  ~Epoch() {
    // Wake a worker waiting for room in the queue and tell it to stop; it finishes at most the
    // batch it is preparing, so the join cannot hang.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    not_full_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  bool done() const { return done_; }
  const Batch& current() const { return current_; }

  // Makes the next batch current (or ends the epoch), rethrowing what preparing it threw.
  void advance() {
    current_ = Batch();
    if (next_ == batches_.size()) {
      done_ = true;
      return;
    }
    Item item = capacity_ == 0 ? prepare(next_) : take();
    ++next_;
    if (item.error) {
      done_ = true;  // the epoch ends with the error
      std::rethrow_exception(item.error);
    }
    current_ = std::move(item.batch);
  }

 private:
  // A prepared batch, or the exception its preparation threw.
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };

  Item prepare(size_t b) const {
    const RecordFunction span("DataLoader: prepare batch", "data");
    Item item;
    try {
      item.batch = dataset_->get_batch(batches_[b]);
      // Pinning here puts the extra host copy on the worker thread, off the training loop's path.
      if (pin_memory_) item.batch = {item.batch.inputs.pin_memory(), item.batch.targets.pin_memory()};
    } catch (...) {
      item.error = std::current_exception();
    }
    return item;
  }

  // The worker pins on the loop's GPU, as PyTorch's pin-memory thread does: pinning on a new
  // thread's default, cuda:0, would give cuda:0 a context in every process. A failure is
  // returned, for the loop to get as the first batch's error.
  std::exception_ptr use_the_loops_gpu() const {
    if (!pin_memory_) return nullptr;
    try {
      cuda::set_device(pin_device_);
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }

  // The worker: prepares every batch in order and queues it, waiting while the queue is full.
  void produce() {
    set_trace_thread_name("DataLoader worker");
    const std::exception_ptr setup_error = use_the_loops_gpu();
    for (size_t b = 0; b < batches_.size(); ++b) {
      Item item = setup_error ? Item{{}, setup_error} : prepare(b);
      const bool failed = item.error != nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
        if (stop_) return;
        queue_.push_back(std::move(item));
      }
      not_empty_.notify_one();
      if (failed) return;  // nothing after a failed batch is wanted
    }
  }

  // The loop's side: the next batch from the worker, in order.
  Item take() {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      not_empty_.wait(lock, [&] { return !queue_.empty(); });
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    not_full_.notify_one();
    return item;
  }

  std::shared_ptr<const Dataset> dataset_;
  std::vector<std::vector<int64_t>> batches_;  // each batch's dataset indices
  size_t capacity_;                            // most batches queued ahead; 0: no worker
  bool pin_memory_;                            // copy each batch into pinned host memory
  Device pin_device_;                          // the GPU current where the epoch began, if pinning
  size_t next_ = 0;                            // index of the batch advance() makes current
  Batch current_;
  bool done_ = false;

  std::mutex mutex_;  // guards queue_ and stop_
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread worker_;  // joined in ~Epoch before any other member is destroyed
};

const Batch& DataLoader::Iterator::operator*() const {
  LOCKSTEP_CHECK(epoch_ != nullptr && !epoch_->done(), "DataLoader: dereferenced an iterator past the last batch");
  return epoch_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  LOCKSTEP_CHECK(epoch_ != nullptr && !epoch_->done(), "DataLoader: advanced an iterator past the last batch");
  epoch_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(const Iterator& other) const {
  const bool at_end = epoch_ == nullptr || epoch_->done();
  const bool other_at_end = other.epoch_ == nullptr || other.epoch_->done();
  if (at_end || other_at_end) return at_end == other_at_end;
  return epoch_ == other.epoch_;  // one epoch has one position
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), sampler_(options.sampler()), options_(std::move(options)) {
  LOCKSTEP_CHECK(dataset_ != nullptr, "DataLoader: expected a dataset, got a null pointer");
  LOCKSTEP_CHECK(options_.batch_size() >= 1, "DataLoader: expected batch_size >= 1, got ", options_.batch_size());
  LOCKSTEP_CHECK(options_.prefetch() >= 0, "DataLoader: expected prefetch >= 0 batches, got ", options_.prefetch());
  // Pinned memory only pays off for copies to a GPU, and cudaHostAlloc needs one to exist.
  LOCKSTEP_CHECK(!options_.pin_memory() || cuda_device_count() > 0, "DataLoader: pin_memory(true) needs a CUDA device, ",
                 built_with_cuda() ? "and this machine has none" : "and Lockstep was built without CUDA",
                 " (pinned memory only speeds up copies to a GPU: leave pin_memory off when training on the CPU)");
  if (sampler_ == nullptr) {
    sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
    options_.sampler(sampler_);
  }
}

DataLoader::~DataLoader() = default;

DataLoader::Iterator DataLoader::begin() {
  // Finish the previous epoch (and its worker) before starting the next.
  epoch_.reset();

  // The epoch's order, cut into batches of batch_size (the last smaller, or dropped).
  const std::vector<int64_t> order = sampler_->indices();
  const size_t batch_size = static_cast<size_t>(options_.batch_size());
  std::vector<std::vector<int64_t>> batches;
  for (size_t start = 0; start < order.size(); start += batch_size) {
    const size_t end = std::min(start + batch_size, order.size());
    if (options_.drop_last() && end - start < batch_size) break;
    batches.emplace_back(order.begin() + start, order.begin() + end);
  }

  epoch_ = std::make_unique<Epoch>(dataset_, std::move(batches), options_.prefetch(), options_.pin_memory());
  epoch_->advance();
  return Iterator(epoch_.get());
}

int64_t DataLoader::size() const {
  const int64_t samples = sampler_->size();
  const int64_t batch_size = options_.batch_size();
  return options_.drop_last() ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

}  // namespace lockstep
