// devmesh/comm/verified_communicator.h
// -----------------------------------------------------------------------------
// VerifyCalls: the per-call check (comm/call_check.h) for a backend that does
// not compare calls itself (NCCL, Gloo), through a second, CPU communicator
// over the same members (the "checker"). Before each collective runs on the
// inner communicator, the members all-gather their CallRecords (48 bytes
// each) over the checker and compare them with group rank 0's; a mismatch
// fails every member with the same InvalidArgument (kDisagreementPayload
// naming the member that differs) before any data moves, and the group
// refuses every later call. Send, Recv and BatchSendRecv are not checked
// (point to point).
//
// The cost is one small all-gather on the checker per collective (a
// shared-memory group inside a host: a few microseconds; Gloo across hosts:
// a round trip): a debugging mode, off by default (device_mesh's
// GroupOptions::verify_calls). For NCCL the check runs on the CPU before the
// collective is enqueued, so it also orders the host threads of the members.
//
// Thread-safety: as the inner communicator's (one collective at a time).
#ifndef DEVMESH_COMM_VERIFIED_COMMUNICATOR_H_
#define DEVMESH_COMM_VERIFIED_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "comm/forwarding_communicator.h"
#include "sync/annotated_mutex.h"

namespace devmesh {

class VerifiedCommunicator final : public ForwardingCommunicator {
 public:
  // Use VerifyCalls.
  VerifiedCommunicator(std::shared_ptr<Communicator> inner,
                       std::shared_ptr<Communicator> checker,
                       std::string label);
  ~VerifiedCommunicator() override { StopAsync(); }

 protected:
  absl::Status Intercept(CallKind kind,
                         absl::FunctionRef<absl::Status()> call) override;
  // Split's children are not verified (the inner communicator's children).
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override;
  // Aborts the checker and the inner communicator; the first error.
  absl::Status DoAbort() override;

 private:
  std::shared_ptr<Communicator> checker_;
  std::string label_;
  sync_internal::Mutex mu_;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);  // sticky after a mismatch
};

// `inner` with its collectives checked over `checker`; `label` names the
// group in a mismatch (CommOptions::label). Errors:
// InvalidArgument when either is null, or `checker` is not over the same
// members in the same order (size, rank, global ranks), naming both.
// The verified collectives' errors: InvalidArgument as above on a mismatch
// ("<backend> verify call #12: the members' calls differ: ..."; later calls
// return it again), the checker's own errors (a member gone, its timeout:
// the call does not run), else the inner communicator's.
absl::StatusOr<std::unique_ptr<Communicator>> VerifyCalls(
    std::shared_ptr<Communicator> inner, std::shared_ptr<Communicator> checker,
    std::string label = "");

}  // namespace devmesh

#endif  // DEVMESH_COMM_VERIFIED_COMMUNICATOR_H_
