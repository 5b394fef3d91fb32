// devmesh/comm/gloo/gloo_loop_waker.cc
#include "comm/gloo/gloo_loop_waker.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "config/settings.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/tcp/loop.h"

namespace devmesh {
namespace gloo_internal {
namespace {

// The handler of every waker's eventfd. The eventfd is registered
// edge-triggered, so the loop need not read it to stop it from being
// reported again; the handler touches nothing, and being one object that is
// never destroyed, it may be called however late.
class NoopHandler final : public ::gloo::transport::tcp::Handler {
 public:
  void handleEvents(int /*events*/) override {}
};

::gloo::transport::tcp::Handler* SharedNoopHandler() {
  static auto* handler = new NoopHandler;
  return handler;
}

// DEVMESH_GLOO_LOOP_BATCH=0 keeps the loop thread under the caller's policy.
bool LoopBatchPolicyWanted() {
  return ProcessSettings().gloo_loop_batch.value_or(true);
}

}  // namespace

void WithLoopThreadSettings(const std::function<void()>& make_device) {
  std::exception_ptr error;
  // A helper thread, so that the caller's own slack and policy are never
  // touched (a caller under SCHED_FIFO could not get its policy back).
  std::thread helper([&] {
    (void)prctl(PR_SET_TIMERSLACK,
                static_cast<unsigned long>(
                    absl::ToInt64Nanoseconds(kIdleTickSlack)),
                0, 0, 0);
    // pid 0: this thread only. Only from the default policy: a real-time
    // or SCHED_IDLE caller's loop keeps what the caller chose.
    if (LoopBatchPolicyWanted() && sched_getscheduler(0) == SCHED_OTHER) {
      sched_param param{};
      (void)sched_setscheduler(0, SCHED_BATCH, &param);
    }
    try {
      make_device();
    } catch (...) {
      error = std::current_exception();
    }
  });
  helper.join();
  if (error) std::rethrow_exception(error);
}

LoopWaker::LoopWaker(int event_fd)
    : event_fd_(event_fd), owner_pid_(static_cast<int>(getpid())) {}

std::shared_ptr<LoopWaker> LoopWaker::Attach(
    ::gloo::transport::Device& device) {
  auto* tcp = dynamic_cast<::gloo::transport::tcp::Device*>(&device);
  if (tcp == nullptr) return nullptr;
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  try {
    tcp->registerDescriptor(fd, EPOLLIN | EPOLLET, SharedNoopHandler());
    return std::shared_ptr<LoopWaker>(new LoopWaker(fd));
  } catch (...) {
    close(fd);
    return nullptr;
  }
}

LoopWaker::~LoopWaker() {
  if (static_cast<int>(getpid()) != owner_pid_) {
    // A copy made by fork(): the thread is the parent's. Leave its handle.
    close(event_fd_);
    return;
  }
  std::thread* thread = nullptr;
  {
    sync_internal::MutexLock lock(&mu_);
    stop_ = true;
    thread = thread_;
  }
  cv_.SignalAll();
  if (thread != nullptr) {
    thread->join();
    delete thread;
  }
  close(event_fd_);
}

void LoopWaker::Wake() {
  const uint64_t one = 1;
  // EAGAIN only when the counter is near 2^64: read it back to zero (this
  // is the only reader) and write again.
  if (write(event_fd_, &one, sizeof(one)) < 0 && errno == EAGAIN) {
    uint64_t drained = 0;
    (void)!read(event_fd_, &drained, sizeof(drained));
    (void)!write(event_fd_, &one, sizeof(one));
  }
}

bool LoopWaker::EnsureThreadLocked() {
  if (thread_ != nullptr) return true;
  if (static_cast<int>(getpid()) != owner_pid_) return false;
  try {
    thread_ = new std::thread([this] { Run(); });
  } catch (...) {
    thread_ = nullptr;  // no thread (limits): waits end at the slowed tick
    return false;
  }
  return true;
}

bool LoopWaker::DueLocked(absl::Time now) const {
  return held_ > 0 || (!deadlines_.empty() && *deadlines_.begin() <= now);
}

void LoopWaker::Begin() {
  bool running = false;
  {
    sync_internal::MutexLock lock(&mu_);
    ++held_;
    ++begins_;
    running = EnsureThreadLocked();
  }
  if (running) {
    cv_.SignalAll();
  } else {
    Wake();  // at least one turn
  }
}

void LoopWaker::End() {
  sync_internal::MutexLock lock(&mu_);
  --held_;
}

LoopWaker::Deadlines::iterator LoopWaker::Arm(absl::Time deadline) {
  bool notify = false;
  Deadlines::iterator it;
  {
    sync_internal::MutexLock lock(&mu_);
    it = deadlines_.insert(deadline);
    last_arm_ = absl::Now();
    if (deadline < planned_wake_ && EnsureThreadLocked()) {
      ++notices_;
      notify = true;
    }
  }
  if (notify) cv_.SignalAll();
  return it;
}

void LoopWaker::Disarm(Deadlines::iterator it) {
  sync_internal::MutexLock lock(&mu_);
  deadlines_.erase(it);
}

void LoopWaker::Run() {
  sync_internal::MutexLock lock(&mu_);
  while (!stop_) {
    if (DueLocked(absl::Now())) {
      // Wake at once, then after kFirstKick, doubling up to kLastKick; a
      // new ScopedLoopKick starts the series again.
      absl::Duration period = kFirstKick;
      uint64_t seen = begins_;
      while (!stop_ && DueLocked(absl::Now())) {
        mu_.Unlock();
        Wake();
        mu_.Lock();
        planned_wake_ = absl::Now() + period;
        // As std::condition_variable::wait_for with a predicate: one
        // steady-clock deadline for the whole wait, whatever wakes it.
        const auto until = std::chrono::steady_clock::now() +
                           absl::ToChronoMicroseconds(period);
        while (!stop_ && begins_ == seen) {
          const auto left = until - std::chrono::steady_clock::now();
          if (left <= left.zero() ||
              cv_.WaitWithTimeout(&mu_, absl::FromChrono(left))) {
            break;
          }
        }
        if (begins_ != seen) {
          seen = begins_;
          period = kFirstKick;
        } else {
          period = std::min(2 * period, kLastKick);
        }
      }
      continue;
    }
    // Nothing due: sleep until the earliest deadline, or while deadline
    // kicks keep coming until kDeadlineLinger after the last one, or until
    // told.
    const absl::Time now = absl::Now();
    absl::Time wake = absl::InfiniteFuture();
    if (!deadlines_.empty()) {
      wake = *deadlines_.begin();
    } else if (last_arm_ + kDeadlineLinger > now) {
      wake = last_arm_ + kDeadlineLinger;
    }
    planned_wake_ = wake;
    const uint64_t seen_notices = notices_;
    const uint64_t seen_begins = begins_;
    // Until told (or `wake` passes); a wake-up without news waits again.
    while (!stop_ && held_ == 0 && begins_ == seen_begins &&
           notices_ == seen_notices) {
      if (wake == absl::InfiniteFuture()) {
        cv_.Wait(&mu_);
      } else if (cv_.WaitWithDeadline(&mu_, wake)) {
        break;
      }
    }
  }
}

ScopedLoopKick::ScopedLoopKick(std::shared_ptr<LoopWaker> waker) noexcept
    : waker_(std::move(waker)) {
  if (waker_ != nullptr) waker_->Begin();
}

ScopedLoopKick::~ScopedLoopKick() {
  if (waker_ != nullptr) waker_->End();
}

ScopedDeadlineKick::ScopedDeadlineKick(LoopWaker* waker,
                                       absl::Time deadline) noexcept
    : waker_(waker) {
  if (waker_ == nullptr) return;
  try {
    it_ = waker_->Arm(deadline);
    armed_ = true;
  } catch (...) {
    // No memory for the entry: the wait's closes end at the slowed tick.
  }
}

ScopedDeadlineKick::~ScopedDeadlineKick() {
  if (armed_) waker_->Disarm(it_);
}

}  // namespace gloo_internal
}  // namespace devmesh
