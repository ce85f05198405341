#include "distributed/join.h"

#include <algorithm>

#include "core/error.h"
#include "distributed/collective_caller.h"
#include "distributed/rank_agreement.h"
#include "util/trace.h"

namespace lockstep {

std::vector<int> JoinRound::active_ranks() const {
  std::vector<int> out;
  for (size_t r = 0; r < announced.size(); ++r) {
    if (announced[r] > 0) out.push_back(static_cast<int>(r));
  }
  return out;
}

std::vector<int> JoinRound::joined_ranks() const {
  std::vector<int> out;
  for (size_t r = 0; r < announced.size(); ++r) {
    if (announced[r] <= 0) out.push_back(static_cast<int>(r));
  }
  return out;
}

int JoinRound::num_active() const { return static_cast<int>(active_ranks().size()); }

int JoinRound::first_active() const {
  const std::vector<int> active = active_ranks();
  return active.empty() ? -1 : active.front();
}

Joinable::~Joinable() {
  // A Join outliving its joinable must not shadow through a dangling pointer.
  if (join_ != nullptr) join_->joinable_ = nullptr;
}

JoinRound Joinable::notify_join(int64_t announce) {
  LOCKSTEP_CHECK(join_ != nullptr, "Joinable::notify_join: this object is in no Join");
  return join_->notify(announce);
}

namespace {
// What to do about it, the same advice on every rank.
constexpr const char* kUnevenAdvice =
    "Give every rank the same number of batches (DistributedSampler does, with the same dataset, "
    "batch size and drop_last on every rank), or leave throw_on_early_termination off to let the "
    "ranks that finish shadow the others";
}  // namespace

Join::Join(Joinable& joinable, const JoinOptions& options)
    : joinable_(&joinable), options_(options), uncaught_at_start_(std::uncaught_exceptions()) {
  LOCKSTEP_CHECK(joinable.join_ == nullptr,
                 "Join: this model is already in a Join; end that one (its finish() or its scope) before starting "
                 "another");
  // Disabled, the joinable never learns of the Join: its forwards stay plain.
  if (options_.enable()) joinable.join_ = this;
}

Join::~Join() noexcept(false) {
  // An exception on its way out (an error in the loop, or throw_on_early_termination on a
  // rank still training): shadowing now would start collectives the other ranks may never
  // match, and a second exception would end the program. Only leave the joinable.
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    detach();
    return;
  }
  finish();
}

void Join::detach() {
  if (joinable_ != nullptr && joinable_->join_ == this) joinable_->join_ = nullptr;
}

JoinRound Join::exchange(int64_t mine) {
  ProcessGroup& group = joinable_->join_process_group();
  std::vector<int64_t> values(static_cast<size_t>(group.size()), 0);
  values[static_cast<size_t>(group.rank())] = mine;
  // One slot per rank, each written by its own rank alone: the sum is every rank's answer.
  const Tensor message =
      from_vector(values, {group.size()}, TensorOptions().dtype(DType::i64).device(joinable_->join_device()));
  {
    const CollectiveCaller caller("Join: count active ranks");
    const RecordFunction span("Join: count active ranks", "ddp");
    group.all_reduce(message, ReduceOp::Sum);
  }
  JoinRound round;
  round.announced = message.to(Device::cpu()).to_vector<int64_t>();
  if (round.num_active() > 0) last_active_ = round.active_ranks();
  return round;
}

JoinRound Join::notify(int64_t announce) {
  LOCKSTEP_CHECK(announce > 0, "Join: a rank still training must announce a positive value, got ", announce);
  ++forwards_;
  const JoinRound round = exchange(announce);
  const std::vector<int> joined = round.joined_ranks();
  if (options_.throw_on_early_termination() && !joined.empty()) {
    detach();
    const int rank = joinable_->join_process_group().rank();
    LOCKSTEP_FAIL("Join: rank(s) ", rank_list(joined), " ran out of inputs while this rank (", rank,
                  ") still had some, after ", forwards_ - 1,
                  " forward(s) here, and throw_on_early_termination is on: every rank stops. ",
                  kUnevenAdvice);
  }
  return round;
}

void Join::finish() {
  if (finished_) return;
  finished_ = true;
  if (!options_.enable() || joinable_ == nullptr) {
    detach();
    return;
  }
  // Leave the joinable whatever happens below: its forwards are plain again afterwards.
  struct Detach {
    Join* join;
    ~Detach() { join->detach(); }
  } leave{this};
  const int rank = joinable_->join_process_group().rank();
  const RecordFunction span("Join: shadow the ranks still training", "ddp");
  //! [shadow loop]
  for (;;) {
    const JoinRound round = exchange(0);
    if (round.num_active() == 0) break;
    if (options_.throw_on_early_termination()) {
      LOCKSTEP_FAIL("Join: this rank (", rank, ") ran out of inputs after ", forwards_,
                    " forward(s) while rank(s) ", rank_list(round.active_ranks()),
                    " still had some, and throw_on_early_termination is on: every rank stops. ",
                    kUnevenAdvice);
    }
    joinable_->join_shadow(round);
    ++shadowed_;
  }
  //! [shadow loop]
  // Every rank saw the same last iteration, so every rank names the same source without
  // another message. (No forward at all inside the Join: rank 0, which changes nothing if the
  // models were in sync when it began.)
  const int source = last_active_.empty() ? 0 : last_active_.front();
  joinable_->join_finish(source);
}

}  // namespace lockstep
