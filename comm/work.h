// devmesh/comm/work.h
// -----------------------------------------------------------------------------
// Work: the handle of an asynchronous collective (Communicator::IAllReduce
// and the other I* calls; PyTorch's Work of async_op=True, MPI's request).
// On the CPU backends the call runs on its communicator's progress thread,
// in issue order with the communicator's other calls; on NCCL it is
// enqueued on a CUDA stream (comm/nccl/nccl_communicator.h). Its buffers
// must stay valid, and unread and unwritten by the caller, until the Work
// is done.
//
//   devmesh::Work w = comm->IAllReduce(grads, grads, n, kFloat32, kSum);
//   ComputeSomethingElse();
//   DEVMESH_RETURN_IF_ERROR(w.Wait());
//
// A Work is a cheap copyable handle: copies see the same call. It may
// outlive its communicator: a call the communicator never ran (it was
// destroyed first) ends with Cancelled.
//
// A backend whose calls are asynchronous by nature (NCCL: enqueued on a CUDA
// stream) makes its Works with Work::FromPoll: they end when its poll says
// so, and Wait polls instead of sleeping on the progress thread.
//
// Thread-safety: every method is safe from any thread, on any copy.
#ifndef DEVMESH_COMM_WORK_H_
#define DEVMESH_COMM_WORK_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace devmesh {

namespace comm_internal {
struct WorkState;
}  // namespace comm_internal

class Work {
 public:
  // A Work that is already done, with `status` (OK by default).
  explicit Work(absl::Status status = absl::OkStatus());

  // Blocks until the call is done or `deadline` passes. Returns the call's
  // Status once done: its own errors, as the blocking form's (a peer's
  // death, Abort: FailedPrecondition, ...), or Cancelled when the
  // communicator was destroyed before the call ran. DeadlineExceeded
  // "the call is still running at the deadline" when `deadline` passes
  // first: the call goes on, and a later Wait or Test sees its end.
  absl::Status Wait(absl::Time deadline = absl::InfiniteFuture()) const;
  // Wait with a timeout from now.
  absl::Status Wait(absl::Duration timeout) const {
    return Wait(absl::Now() + timeout);
  }
  // Whether the call is done. Never waits for the call; a polled Work
  // polls once (false at once while another thread polls it), and that
  // poll may end the call (NCCL: abort past the timeout).
  bool Test() const;

  // For backends: a Work that ends when `poll` returns a Status (the
  // call's), polled by Wait every 50 us until then (never after) and once
  // by each Test. `poll` returns std::nullopt while the call runs; it is
  // called by one thread at a time, from whichever thread waits, and must
  // bound the call itself (its own deadline): Wait's deadline only stops
  // waiting. It may be called after its communicator is gone.
  static Work FromPoll(std::function<std::optional<absl::Status>()> poll);

  // For the Communicator front only.
  explicit Work(std::shared_ptr<comm_internal::WorkState> state)
      : state_(std::move(state)) {}

 private:
  std::shared_ptr<comm_internal::WorkState> state_;
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_WORK_H_
