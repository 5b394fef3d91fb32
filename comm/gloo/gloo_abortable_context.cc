// devmesh/comm/gloo/gloo_abortable_context.cc
#include "comm/gloo/gloo_abortable_context.h"

#include <atomic>
#include <string>
#include <utility>
#include <vector>

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

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    ThrowIfAborted("receive");
    const bool done = inner_->waitRecv(rank, timeout);
    ThrowIfAborted("receive");
    return done;
  }
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    ThrowIfAborted("send");
    const bool done = inner_->waitSend(rank, timeout);
    ThrowIfAborted("send");
    return done;
  }
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    ThrowIfAborted("send");
    inner_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    ThrowIfAborted("receive");
    inner_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset,
            size_t nbytes) override {
    ThrowIfAborted("receive");
    inner_->recv(std::move(srcs), slot, offset, nbytes);
  }

  // Called with the context's mutex held.
  void Abort() {
    aborted_.store(true);
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
    std::shared_ptr<::gloo::transport::Context> inner)
    : ::gloo::transport::Context(inner->rank, inner->size),
      inner_(std::move(inner)) {
  setTimeout(inner_->getTimeout());
}

std::unique_ptr<::gloo::transport::UnboundBuffer>
AbortableContext::createUnboundBuffer(void* ptr, size_t size) {
  return std::make_unique<AbortableBuffer>(
      inner_->createUnboundBuffer(ptr, size), shared_from_this());
}

void AbortableContext::AbortWaits() {
  std::lock_guard<std::mutex> lock(buffers_mu_);
  aborted_ = true;
  for (AbortableBuffer* b : buffers_) b->Abort();
}

void AbortableContext::Add(AbortableBuffer* buffer) {
  std::lock_guard<std::mutex> lock(buffers_mu_);
  buffers_.insert(buffer);
  if (aborted_) buffer->Abort();
}

void AbortableContext::Remove(AbortableBuffer* buffer) {
  std::lock_guard<std::mutex> lock(buffers_mu_);
  buffers_.erase(buffer);
}

}  // namespace gloo_internal
}  // namespace devmesh
