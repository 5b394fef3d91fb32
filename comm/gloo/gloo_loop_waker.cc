// devmesh/comm/gloo/gloo_loop_waker.cc
#include "comm/gloo/gloo_loop_waker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>

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

}  // namespace

void WithIdleTickSlack(const std::function<void()>& make_device) {
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  const bool raised =
      old_slack >= 0 &&
      prctl(PR_SET_TIMERSLACK,
            static_cast<unsigned long>(
                absl::ToInt64Nanoseconds(kIdleTickSlack)),
            0, 0, 0) == 0;
  // Restore even when make_device throws (it is called inside GlooCall).
  struct Restore {
    bool raised;
    int old_slack;
    ~Restore() {
      if (raised) {
        prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0,
              0);
      }
    }
  } restore{raised, old_slack};
  make_device();
}

std::shared_ptr<LoopWaker> LoopWaker::Attach(
    ::gloo::transport::Device& device) {
  auto* tcp = dynamic_cast<::gloo::transport::tcp::Device*>(&device);
  if (tcp == nullptr) return nullptr;
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  try {
    tcp->registerDescriptor(fd, EPOLLIN | EPOLLET, SharedNoopHandler());
  } catch (const std::exception&) {
    close(fd);
    return nullptr;
  }
  return std::shared_ptr<LoopWaker>(new LoopWaker(fd));
}

LoopWaker::~LoopWaker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
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

void LoopWaker::Begin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++held_;
    ++begins_;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  cv_.notify_all();
}

void LoopWaker::End() {
  std::lock_guard<std::mutex> lock(mu_);
  --held_;
}

void LoopWaker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || held_ > 0; });
    if (stop_) return;
    // Wake at once, then after kFirstKick, doubling up to kLastKick; a new
    // kick starts the series again.
    absl::Duration period = kFirstKick;
    uint64_t seen = begins_;
    while (!stop_ && held_ > 0) {
      lock.unlock();
      Wake();
      lock.lock();
      cv_.wait_for(lock, absl::ToChronoMicroseconds(period),
                   [&] { return stop_ || begins_ != seen; });
      if (begins_ != seen) {
        seen = begins_;
        period = kFirstKick;
      } else {
        period = std::min(2 * period, kLastKick);
      }
    }
  }
}

ScopedLoopKick::ScopedLoopKick(std::shared_ptr<LoopWaker> waker)
    : waker_(std::move(waker)) {
  if (waker_ != nullptr) waker_->Begin();
}

ScopedLoopKick::~ScopedLoopKick() {
  if (waker_ != nullptr) waker_->End();
}

}  // namespace gloo_internal
}  // namespace devmesh
