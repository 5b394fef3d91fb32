// devmesh/comm/work.cc
// Work (comm/work.h) and the progress thread that completes it
// (comm/async_queue.h).
#include "comm/work.h"

#include <exception>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/async_queue.h"

namespace devmesh {
namespace comm_internal {
namespace {

// How often Work::Wait polls a Work made by Work::FromPoll.
constexpr absl::Duration kPollPeriod = absl::Microseconds(50);

}  // namespace

void WorkState::Finish(absl::Status s) {
  {
    sync_internal::MutexLock lock(&mu);
    if (done) return;
    status = std::move(s);
    done = true;
  }
  done_cv.SignalAll();
}

bool WorkState::Poll(bool wait_for_poller) {
  {
    sync_internal::MutexLock lock(&mu);
    if (done || !poll) return done;
  }
  if (wait_for_poller) {
    poll_mu.Lock();
  } else if (!poll_mu.TryLock()) {
    return false;  // Another thread polls now.
  }
  bool ended = false;
  {
    sync_internal::MutexLock lock(&mu);  // Another poll may have ended it.
    ended = done;
  }
  if (!ended) {
    std::optional<absl::Status> result = poll();
    if (result.has_value()) {
      Finish(*std::move(result));
      ended = true;
    }
  }
  poll_mu.Unlock();
  return ended;
}

AsyncQueue::AsyncQueue() {
  thread_ = std::thread([this] { Run(); });
  thread_id_ = thread_.get_id();
}

AsyncQueue::~AsyncQueue() {
  Stop(absl::CancelledError(
      "the communicator was destroyed before this call ran"));
}

Work AsyncQueue::Push(std::function<absl::Status()> call) {
  auto state = std::make_shared<WorkState>();
  absl::Status refused;
  {
    sync_internal::MutexLock lock(&mu_);
    if (stopped_) {
      refused = stop_status_;
    } else {
      queue_.push_back(Item{std::move(call), state});
    }
  }
  if (!refused.ok()) {
    state->Finish(refused);
  } else {
    cv_.SignalAll();
  }
  return Work(std::move(state));
}

void AsyncQueue::Drain() {
  if (std::this_thread::get_id() == thread_id_) return;
  sync_internal::MutexLock lock(&mu_);
  while (!queue_.empty() || running_) cv_.Wait(&mu_);
}

void AsyncQueue::Stop(const absl::Status& why,
                      const std::function<void()>& on_running) {
  std::deque<Item> dropped;
  bool running = false;
  {
    sync_internal::MutexLock lock(&mu_);
    if (!stopped_) {
      stopped_ = true;
      stop_status_ = why;
    }
    dropped.swap(queue_);
    running = running_;
  }
  cv_.SignalAll();
  for (Item& item : dropped) item.state->Finish(why);
  if (running && on_running) on_running();
  if (thread_.joinable() && std::this_thread::get_id() != thread_id_) {
    thread_.join();
  }
}

void AsyncQueue::Run() {
  sync_internal::MutexLock lock(&mu_);
  for (;;) {
    while (!stopped_ && queue_.empty()) cv_.Wait(&mu_);
    if (queue_.empty()) return;  // stopped, nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    mu_.Unlock();
    absl::Status s;
    try {
      s = item.call();
    } catch (const std::bad_alloc&) {
      s = absl::ResourceExhaustedError(
          "out of memory in an asynchronous call");
    } catch (const std::exception& e) {
      s = absl::InternalError(
          absl::StrCat("an asynchronous call threw: ", e.what()));
    }
    item.state->Finish(std::move(s));
    mu_.Lock();
    running_ = false;
    cv_.SignalAll();
  }
}

}  // namespace comm_internal

Work::Work(absl::Status status)
    : state_(std::make_shared<comm_internal::WorkState>()) {
  state_->Finish(std::move(status));
}

Work Work::FromPoll(std::function<std::optional<absl::Status>()> poll) {
  auto state = std::make_shared<comm_internal::WorkState>();
  state->poll = std::move(poll);
  return Work(std::move(state));
}

absl::Status Work::Wait(absl::Time deadline) const {
  comm_internal::WorkState& state = *state_;
  if (state.poll) {
    while (!state.Poll()) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            "the call is still running at the deadline");
      }
      absl::SleepFor(comm_internal::kPollPeriod);
    }
    sync_internal::MutexLock lock(&state.mu);
    return state.status;
  }
  sync_internal::MutexLock lock(&state.mu);
  while (!state.done) {
    if (deadline == absl::InfiniteFuture()) {
      state.done_cv.Wait(&state.mu);
    } else if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          "the call is still running at the deadline");
    } else {
      state.done_cv.WaitWithDeadline(&state.mu, deadline);
    }
  }
  return state.status;
}

bool Work::Test() const { return state_->Poll(/*wait_for_poller=*/false); }

}  // namespace devmesh
