// devmesh/comm/gloo/gloo_abortable_context.cc
#include "comm/gloo/gloo_abortable_context.h"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gloo/common/error.h"

namespace devmesh {
namespace gloo_internal {

// Forwards to Gloo's buffer; throws once aborted.
class AbortableBuffer final : public ::gloo::transport::UnboundBuffer {
 public:
  AbortableBuffer(std::unique_ptr<::gloo::transport::UnboundBuffer> inner,
                  std::shared_ptr<AbortableContext> context)
      : ::gloo::transport::UnboundBuffer(inner->ptr, inner->size),
        inner_(std::move(inner)),
        context_(std::move(context)) {
    context_->Add(this);
  }
  ~AbortableBuffer() override { context_->Remove(this); }

  // A wait that times out makes Gloo close every pair of the context on this
  // thread, each close waiting for a loop turn: kick the loop from the
  // timeout on (gloo_loop_waker.h).
  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    ThrowIfAborted("receive");
    ScopedDeadlineKick kick(context_->waker_.get(), DeadlineOf(timeout));
    const bool done = inner_->waitRecv(rank, timeout);
    ThrowIfAborted("receive");
    return done;
  }
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    ThrowIfAborted("send");
    ScopedDeadlineKick kick(context_->waker_.get(), DeadlineOf(timeout));
    const bool done = inner_->waitSend(rank, timeout);
    ThrowIfAborted("send");
    return done;
  }
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }
  // Posts hold the context's io_mu_ shared, so Abort never closes a pair
  // under one.
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    std::shared_lock<std::shared_mutex> io(context_->io_mu_);
    ThrowIfAborted("send");
    inner_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    std::shared_lock<std::shared_mutex> io(context_->io_mu_);
    ThrowIfAborted("receive");
    inner_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset,
            size_t nbytes) override {
    std::shared_lock<std::shared_mutex> io(context_->io_mu_);
    ThrowIfAborted("receive");
    inner_->recv(std::move(srcs), slot, offset, nbytes);
  }

  // When a wait of `timeout` (Gloo's kUnsetTimeout, negative: the context's)
  // that starts now times out.
  absl::Time DeadlineOf(std::chrono::milliseconds timeout) const {
    if (timeout.count() < 0) timeout = context_->getTimeout();
    return absl::Now() + absl::FromChrono(timeout);
  }

  // Called with the context's buffers_mu_ held.
  void MarkAborted() { aborted_.store(true); }
  void WakeWaits() {
    inner_->abortWaitRecv();
    inner_->abortWaitSend();
  }

 private:
  void ThrowIfAborted(const char* what) const {
    if (aborted_.load()) {
      throw ::gloo::IoException(
          std::string("the group was aborted during a ") + what);
    }
  }

  std::unique_ptr<::gloo::transport::UnboundBuffer> inner_;
  std::shared_ptr<AbortableContext> context_;
  std::atomic<bool> aborted_{false};
};

AbortableContext::AbortableContext(
    std::shared_ptr<::gloo::transport::Context> inner,
    std::shared_ptr<LoopWaker> waker)
    : ::gloo::transport::Context(inner->rank, inner->size),
      inner_(std::move(inner)),
      waker_(std::move(waker)) {
  setTimeout(inner_->getTimeout());
}

AbortableContext::~AbortableContext() {
  // The pairs close as the inner context goes: each waits for a loop turn.
  ScopedLoopKick kick(waker_);
  inner_.reset();
}

std::unique_ptr<::gloo::transport::UnboundBuffer>
AbortableContext::createUnboundBuffer(void* ptr, size_t size) {
  return std::make_unique<AbortableBuffer>(
      inner_->createUnboundBuffer(ptr, size), shared_from_this());
}

void AbortableContext::Abort(const std::function<void()>& close_pairs) {
  ScopedLoopKick kick(waker_);
  {
    std::unique_lock<std::shared_mutex> io(io_mu_);
    {
      sync_internal::MutexLock lock(&buffers_mu_);
      aborted_ = true;
      for (AbortableBuffer* b : buffers_) b->MarkAborted();
    }
    close_pairs();
  }
  sync_internal::MutexLock lock(&buffers_mu_);
  for (AbortableBuffer* b : buffers_) b->WakeWaits();
}

void AbortableContext::Add(AbortableBuffer* buffer) {
  sync_internal::MutexLock lock(&buffers_mu_);
  buffers_.insert(buffer);
  if (aborted_) {
    buffer->MarkAborted();
    buffer->WakeWaits();
  }
}

void AbortableContext::Remove(AbortableBuffer* buffer) {
  sync_internal::MutexLock lock(&buffers_mu_);
  buffers_.erase(buffer);
}

}  // namespace gloo_internal
}  // namespace devmesh
