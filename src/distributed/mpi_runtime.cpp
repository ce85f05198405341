// Starting and stopping MPI, and the progress service (declared in
// distributed/process_group_mpi.h).
//
// The progress service lets a watchdog ask the other ranks where they are. Each rank runs one
// thread that waits for questions on a communicator of its own ("what is group 0 doing?") and
// answers from Watchdog::progress_of_group. It answers while the rank's own collectives wait,
// and while the rank computes: only a rank that is stopped (SIGSTOP, a debugger) or frozen
// solid stays silent. Questions and answers are small point-to-point messages, so they need
// no collective and never pair with the program's own messages.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "distributed/mpi_check.h"
#include "distributed/mpi_reduce_ops.h"
#include "distributed/process_group_mpi.h"

namespace lockstep {

bool built_with_mpi() { return true; }

namespace mpi {

namespace {

// A question names a group; an answer is one fixed-size record.
struct Answer {
  uint64_t started;
  uint8_t known;     // the group exists on the answering rank
  uint8_t finished;
  char waiting_in[246];
};
static_assert(sizeof(Answer) == 256, "an answer is one fixed-size record on every rank");

constexpr int kQuestionTag = 1;
// Answers come back with a tag of their group, so that two watchdogs of one process asking at
// once (an NCCL group and its MPI group) never take each other's answers.
int answer_tag(uint64_t group_id) { return 2 + static_cast<int>(group_id % 16384); }

struct ProgressService {
  MPI_Comm comm = MPI_COMM_NULL;
  std::thread thread;
  std::atomic<bool> stopping{false};
};

ProgressService& service() {
  static ProgressService s;
  return s;
}

// Polls MPI for `request` until it completes or `deadline` passes; true if it completed.
bool wait_until(MPI_Request& request, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The service's thread: answers every question until asked to stop.
void answer_questions() {
  ProgressService& s = service();
  uint64_t group = 0;
  MPI_Request question;
  MPI_Irecv(&group, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kQuestionTag, s.comm, &question);
  while (!s.stopping.load()) {
    int asked = 0;
    MPI_Status status;
    MPI_Test(&question, &asked, &status);
    if (!asked) {
      // Often enough to answer within a grace period, rarely enough to cost nothing.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    Answer answer{};
    if (const std::optional<PeerProgress> p = Watchdog::progress_of_group(group)) {
      answer.known = 1;
      answer.started = p->started;
      answer.finished = p->finished ? 1 : 0;
      std::strncpy(answer.waiting_in, p->waiting_in.c_str(), sizeof(answer.waiting_in) - 1);
    }
    // The asker posted its receive before asking, so this send completes; a bounded wait all
    // the same, in case the asker has been ended meanwhile.
    MPI_Request reply;
    MPI_Isend(&answer, sizeof(answer), MPI_BYTE, status.MPI_SOURCE, answer_tag(group), s.comm, &reply);
    if (!wait_until(reply, std::chrono::steady_clock::now() + std::chrono::seconds(1))) MPI_Request_free(&reply);
    MPI_Irecv(&group, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kQuestionTag, s.comm, &question);
  }
  MPI_Cancel(&question);
  MPI_Wait(&question, MPI_STATUS_IGNORE);
}

void start_progress_service() {
  ProgressService& s = service();
  LOCKSTEP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s.comm));
  LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN));
  s.stopping = false;
  s.thread = std::thread(answer_questions);
}

void stop_progress_service() {
  ProgressService& s = service();
  if (!s.thread.joinable()) return;
  s.stopping = true;
  s.thread.join();
  MPI_Comm_free(&s.comm);
}

}  // namespace

void initialize() {
  int started = 0;
  LOCKSTEP_MPI_CHECK(MPI_Initialized(&started));
  int provided = 0;
  if (!started) {
    LOCKSTEP_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    LOCKSTEP_CHECK(provided >= MPI_THREAD_SERIALIZED,
                   "MPI: this MPI library does not allow calls from a thread other than main (it provides thread ",
                   "level ", provided, "); Lockstep needs MPI_THREAD_SERIALIZED");
  } else {
    LOCKSTEP_MPI_CHECK(MPI_Query_thread(&provided));
  }
  // Here, on the main thread before any group's worker calls MPI: the ops that reduce f16 and
  // bf16 tensors, which MPI lacks (also when someone else started MPI).
  create_16bit_ops();
  // Answering other ranks' watchdogs takes a second thread in MPI at once.
  const auto [rank, size] = world_rank_and_size();
  (void)rank;
  if (size > 1 && provided >= MPI_THREAD_MULTIPLE && !service().thread.joinable()) start_progress_service();
}

bool progress_service_running() { return service().thread.joinable(); }

std::vector<std::optional<PeerProgress>> ask_peers(uint64_t group_id, double grace_s) {
  ProgressService& s = service();
  const auto [me, size] = world_rank_and_size();
  std::vector<std::optional<PeerProgress>> progress(static_cast<size_t>(size));
  if (!progress_service_running()) return progress;
  // Receives first, then questions: an answer always finds its receive posted.
  std::vector<Answer> answers(static_cast<size_t>(size));
  std::vector<MPI_Request> replies(static_cast<size_t>(size), MPI_REQUEST_NULL);
  std::vector<MPI_Request> questions(static_cast<size_t>(size), MPI_REQUEST_NULL);
  for (int r = 0; r < size; ++r) {
    if (r == me) continue;
    MPI_Irecv(&answers[r], sizeof(Answer), MPI_BYTE, r, answer_tag(group_id), s.comm, &replies[r]);
    MPI_Isend(&group_id, 1, MPI_UINT64_T, r, kQuestionTag, s.comm, &questions[r]);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                               std::chrono::duration<double>(grace_s));
  for (int r = 0; r < size; ++r) {
    if (r == me) continue;
    if (wait_until(replies[r], deadline)) {
      const Answer& a = answers[r];
      if (a.known) {
        PeerProgress p;
        p.started = a.started;
        p.finished = a.finished != 0;
        p.waiting_in = std::string(a.waiting_in, strnlen(a.waiting_in, sizeof(a.waiting_in)));
        progress[r] = p;
      }
    } else {
      MPI_Cancel(&replies[r]);
      MPI_Request_free(&replies[r]);
    }
    // A question to a silent rank may never be taken; the job ends soon, so let it go.
    if (questions[r] != MPI_REQUEST_NULL) MPI_Request_free(&questions[r]);
  }
  return progress;
}

bool is_initialized() {
  int started = 0, finished = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&finished);
  return started && !finished;
}

std::pair<int, int> world_rank_and_size() {
  int rank = 0, size = 1;
  LOCKSTEP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  LOCKSTEP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return {rank, size};
}

std::pair<int, int> node_rank_and_size() {
  // The ranks that can share memory with this one are the ranks on this machine.
  MPI_Comm node;
  LOCKSTEP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int rank = 0, size = 1;
  LOCKSTEP_MPI_CHECK(MPI_Comm_rank(node, &rank));
  LOCKSTEP_MPI_CHECK(MPI_Comm_size(node, &size));
  LOCKSTEP_MPI_CHECK(MPI_Comm_free(&node));
  return {rank, size};
}

void finalize() {
  if (!is_initialized()) return;
  stop_progress_service();
  free_16bit_ops();
  MPI_Finalize();
}

void abort(int code) {
  if (is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace mpi
}  // namespace lockstep
