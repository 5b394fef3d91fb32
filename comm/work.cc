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

void WorkState::Finish(absl::Status s) {
  {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
  }
  done_cv.notify_all();
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
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) {
      refused = stop_status_;
    } else {
      queue_.push_back(Item{std::move(call), state});
    }
  }
  if (!refused.ok()) {
    state->Finish(refused);
  } else {
    cv_.notify_all();
  }
  return Work(std::move(state));
}

void AsyncQueue::Drain() {
  if (std::this_thread::get_id() == thread_id_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !running_; });
}

void AsyncQueue::Stop(const absl::Status& why,
                      const std::function<void()>& on_running) {
  std::deque<Item> dropped;
  bool running = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      stopped_ = true;
      stop_status_ = why;
    }
    dropped.swap(queue_);
    running = running_;
  }
  cv_.notify_all();
  for (Item& item : dropped) item.state->Finish(why);
  if (running && on_running) on_running();
  if (thread_.joinable() && std::this_thread::get_id() != thread_id_) {
    thread_.join();
  }
}

void AsyncQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopped, nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
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
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace comm_internal

Work::Work(absl::Status status)
    : state_(std::make_shared<comm_internal::WorkState>()) {
  state_->Finish(std::move(status));
}

absl::Status Work::Wait(absl::Time deadline) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  while (!state_->done) {
    if (deadline == absl::InfiniteFuture()) {
      state_->done_cv.wait(lock);
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          "the call is still running at the deadline");
    }
    state_->done_cv.wait_for(lock, absl::ToChronoNanoseconds(left));
  }
  return state_->status;
}

bool Work::Test() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

}  // namespace devmesh
