// devmesh/comm/gloo/gloo_abortable_context.h
// -----------------------------------------------------------------------------
// AbortableContext: a Gloo transport context that forwards to the device's
// own (pairs, timeouts and all), with one addition: every unbound buffer it
// makes (Gloo's algorithms make theirs through the context) is wrapped so
// that Abort() ends every wait on every live buffer at once, by throwing
// ::gloo::IoException("the group was aborted ...") out of waitRecv /
// waitSend (and out of any later send or receive). It closes the one gap the socket shutdown of gloo_shutdown.h
// leaves: Debian's Gloo (2022-05) does not signal the buffer of a message it
// is halfway through reading when the connection fails
// (Pair::signalException reaches the pending operations only), so such a
// receive would wait for the group's whole timeout.
//
// How: a buffer's wait is Gloo's own (tcp::UnboundBuffer::waitRecv, with its
// timeout); Abort calls the buffer's public abortWaitRecv / abortWaitSend,
// which wake the wait (or make the next one return at once), and the
// wrapper then throws. A buffer made after Abort throws at its first use.
// Buffers are tracked under a mutex that Abort holds while it touches them
// and that each wrapper's destructor takes, so no buffer is touched after it
// is gone. A wrapper rather than a subclass of Gloo's TCP
// context: Debian's package lacks a header (gloo/common/memory.h) that the
// TCP context's class definition needs.
//
// The waits are woken only after the pairs are closed: Pair::close waits for
// Gloo's loop to leave the pair, whereas a woken call returns at once, and
// its caller may free a buffer the loop is still reading into. Set the
// timeout on the inner context before wrapping it (the wrapper copies it;
// Gloo's buffers read the inner one).
//
// Pair closes wait for a turn of Gloo's event loop, which devmesh's devices
// make only on demand (gloo_loop_waker.h): Abort and the destructor (which
// destroys the inner context, and with it the pairs) hold a ScopedLoopKick of
// the waker given at construction, and every buffer wait holds a
// ScopedDeadlineKick from its timeout on (a timed-out wait makes Gloo close
// every pair on the waiting thread). The waker may be null: the closes then
// end at the loop's slowed idle tick.
//
// Thread-safety: Abort may be called from any thread, concurrently with the
// collectives it aborts.
#ifndef DEVMESH_COMM_GLOO_GLOO_ABORTABLE_CONTEXT_H_
#define DEVMESH_COMM_GLOO_GLOO_ABORTABLE_CONTEXT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <shared_mutex>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "comm/gloo/gloo_loop_waker.h"
#include "gloo/transport/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace gloo_internal {

class AbortableBuffer;

class AbortableContext final
    : public ::gloo::transport::Context,
      public std::enable_shared_from_this<AbortableContext> {
 public:
  AbortableContext(std::shared_ptr<::gloo::transport::Context> inner,
                   std::shared_ptr<LoopWaker> waker);
  ~AbortableContext() override;

  std::unique_ptr<::gloo::transport::Pair>& getPair(int rank) override {
    return inner_->getPair(rank);
  }
  std::unique_ptr<::gloo::transport::Pair>& createPair(int rank) override {
    return inner_->createPair(rank);
  }
  std::unique_ptr<::gloo::transport::UnboundBuffer> createUnboundBuffer(
      void* ptr, size_t size) override;

  // Aborts the group's buffers around `close_pairs` (which closes every
  // pair): first, with no send or receive being posted (they hold io_mu_
  // shared while they post), every buffer, live or made later, is marked so
  // that its next send, receive or wait throws; then `close_pairs` runs
  // (still excluding posts: a post on a pair Gloo closed without an error
  // trips an enforce in Gloo's loop instead of throwing); then every wait
  // is woken.
  void Abort(const std::function<void()>& close_pairs);

 private:
  friend class AbortableBuffer;
  void Add(AbortableBuffer* buffer);
  void Remove(AbortableBuffer* buffer);

  std::shared_ptr<::gloo::transport::Context> inner_;
  const std::shared_ptr<LoopWaker> waker_;
  // shared: a post in progress; unique: Abort. A gate that guards no member
  // (std::shared_mutex: the analysis has nothing to check on it).
  std::shared_mutex io_mu_;
  sync_internal::Mutex buffers_mu_;
  bool aborted_ ABSL_GUARDED_BY(buffers_mu_) = false;
  std::unordered_set<AbortableBuffer*> buffers_ ABSL_GUARDED_BY(buffers_mu_);
};

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_ABORTABLE_CONTEXT_H_
