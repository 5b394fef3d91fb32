// devmesh/comm/async_queue.h
// -----------------------------------------------------------------------------
// AsyncQueue: a communicator's progress thread for the I* calls
// (comm/work.h): calls run one at a time in the order they were pushed.
// Internal to comm/ (Communicator holds one, made at its first I* call).
//
// Thread-safety: Push, Drain and Stop from any thread; Drain from the
// progress thread itself returns at once (a call it runs is already in
// order).
#ifndef DEVMESH_COMM_ASYNC_QUEUE_H_
#define DEVMESH_COMM_ASYNC_QUEUE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/work.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace comm_internal {

// The shared state of a Work and the queue (or the poll) that completes it.
struct WorkState {
  sync_internal::Mutex mu;
  sync_internal::CondVar done_cv;  // signalled when done
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  // Work::FromPoll's; set before the Work is handed out, never changed.
  std::function<std::optional<absl::Status>()> poll;
  // Serializes calls of `poll`.
  sync_internal::Mutex poll_mu ABSL_ACQUIRED_BEFORE(mu);

  // The first call sets the Status; later calls change nothing.
  void Finish(absl::Status s) ABSL_LOCKS_EXCLUDED(mu);
  // Whether done (after one poll when polled and not yet done). With
  // `wait_for_poller` false, a poll running on another thread is not waited
  // for: false at once.
  bool Poll(bool wait_for_poller = true) ABSL_LOCKS_EXCLUDED(mu, poll_mu);
};

class AsyncQueue {
 public:
  AsyncQueue();
  // Stop(Cancelled "the communicator was destroyed before this call ran"),
  // nothing run for a running call.
  ~AsyncQueue();
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;

  // Queues `call`; its Work ends with what it returns. After Stop, the
  // Work ends at once with Stop's status.
  Work Push(std::function<absl::Status()> call) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns once every call pushed before it has ended.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every queued call with `why` (they never run), runs `on_running`
  // when a call is running (to end it: Abort), waits for that call to end
  // and joins the thread. Later calls: at once.
  void Stop(const absl::Status& why,
            const std::function<void()>& on_running = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Item {
    std::function<absl::Status()> call;
    std::shared_ptr<WorkState> state;
  };
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  sync_internal::Mutex mu_;
  sync_internal::CondVar cv_;  // signalled on every change of the queue
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a call is in progress
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stop_status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  std::thread::id thread_id_;
};

}  // namespace comm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_ASYNC_QUEUE_H_
