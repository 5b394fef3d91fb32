// devmesh/comm/ucx/ucx_group.h
// -----------------------------------------------------------------------------
// UcxGroup: one "ucx" communicator's point-to-point layer over the process's
// worker (ucx_worker.h): the members' worker addresses, this member's
// endpoints to them (made on first use, with UCX's peer-failure handling),
// the group's tag space, and the per-call check carried by every message.
// The collective algorithms (comm/algorithms/p2p_collectives.h) run over its
// Exchange.
//
// Tags: the group's 32-bit id (agreed at creation), a channel (collective,
// send/recv, notice, split) and the sender's group rank; receives name their
// sender, so messages of different groups, channels and senders never match
// each other, and UCX keeps each sender's order.
//
// The per-call check: every message starts with a 32-byte header holding the
// sender's CallRecord (comm/communicator.h; Send/Recv: kind, dtype and
// count), which the receiver compares with its own call before it uses the
// data (the data has landed in the receive buffer by then: on an error the
// buffers' contents are unspecified). A difference fails this member's call
// with the InvalidArgument of comm/call_check.h (kDisagreementPayload; the
// reference is the lower group rank of the two members compared), and this
// member then sends a notice with both records to every other member; a
// member that waits on any message of the group, or starts its next call,
// reads the notice and fails alike. A message longer than the receiver's
// call expects cannot be read (UCX truncates it to nothing): the receiver
// waits up to 200 ms for a notice from a member that knows both calls, else
// names the sender with its own call only. Send/Recv mismatches fail the
// receiver only (no disagreement notice; it then tells the others it
// stopped). Collectives of count 0 send nothing, so a member that passes 0
// where the others pass more is found at its next call (or the others time
// out). The group refuses every later call with the error.
//
// Failures: a wait for a message of a member whose endpoint UCX reports
// failed (its process gone, its connection reset) fails with Unavailable and
// kPeerPayload naming it; a member that destroyed its communicator sends a
// notice first, so the others' error says it left (kPeerLeftPayload); a
// member whose call failed tells the others it stopped, so that those
// waiting for it fail at once, naming it. Only waits that still need that
// member's messages fail: a member may leave once its last call is done,
// having sent all that the others' calls still need (a broadcast's root
// runs ahead of its leaves); a send still pending to a member that left
// counts as done. A wait past the call's deadline fails with
// DeadlineExceeded naming the members whose messages did not come; Abort
// (any thread) ends every wait within about 5 ms with FailedPrecondition.
// After any of these, the call's receives are cancelled and the endpoints
// of whatever UCX still holds are closed (forced), and the call returns once
// UCX has ended its messages, at most 1 s more. A receive that UCX had
// matched and whose sender stopped mid-message cannot be cancelled: its
// connection is closed with the endpoint toward its sender (UCX's TCP
// transport carries both directions of a pair on one connection), so no
// more of it arrives; on transports that do not share a connection so (RDMA
// with UCX_TLS set) the rest of such a message could still land in the
// buffer after the call returned. The group refuses every later call with
// the same error.
//
// Thread-safety: one Exchange, Post, Wait or WaitAll (and one Begin before
// them) at a time; Abort from any thread.
#ifndef DEVMESH_COMM_UCX_UCX_GROUP_H_
#define DEVMESH_COMM_UCX_UCX_GROUP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/algorithms/p2p_collectives.h"
#include "comm/communicator.h"
#include "comm/ucx/ucx_worker.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace ucx_internal {

// Which messages an Exchange carries (part of the tag).
enum class Channel : uint32_t {
  kCollective = 0,  // checked against the current call
  kPointToPoint = 1,  // Send/Recv: checked for kind, dtype and count
  kNotice = 2,        // disagreement and left notices (internal)
  kSplit = 3,         // Split's (color, key) exchange: not checked
};

class UcxGroup final : public algorithms::PointToPoint {
 public:
  // `addresses[r]` is group rank r's worker address, `global_ranks[r]` its
  // global rank; `id` is the same on every member and unique among this
  // process's live groups (CreateUcxCommunicator checks it).
  UcxGroup(UcxWorker* worker, uint32_t id, int rank,
           std::vector<std::string> addresses, std::vector<int> global_ranks,
           absl::Duration timeout, std::string label);
  // Tells every member this one has an endpoint to that it left (waiting up
  // to 200 ms for those notices), then closes the endpoints (flushed, or
  // forced for those UCX reported failed; waited for up to 1 s, then left to
  // UCX). Messages other members sent to this group and nobody received stay
  // in the worker's queue for the process's life.
  ~UcxGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(addresses_.size()); }
  uint32_t id() const { return id_; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  const std::vector<std::string>& addresses() const { return addresses_; }
  absl::Duration timeout() const { return timeout_; }
  const std::string& label() const { return label_; }

  // Starts a call: the Exchanges until the next Begin carry `call` on
  // `channel` (kCollective: the front's current_call(); kPointToPoint: a
  // record of kind kSend with the message's dtype and count, which the
  // receiving member's kRecv record must match) and end by `timeout()` from
  // now. Returns the group's standing error, or a notice's, if any.
  absl::Status Begin(Channel channel, const CallRecord& call);

  absl::Status Exchange(absl::Span<const algorithms::SendSpec> sends,
                        absl::Span<const algorithms::RecvSpec> recvs) override;
  // Exchange split in two (p2p_collectives.h): the same messages, checks
  // and errors; an error of any of them ends every posted message first.
  absl::StatusOr<algorithms::Ticket> Post(
      const algorithms::SendSpec& send) override;
  absl::StatusOr<algorithms::Ticket> Post(
      const algorithms::RecvSpec& recv) override;
  absl::Status Wait(algorithms::Ticket ticket) override;
  absl::Status WaitAll() override;

  // Ends every wait at once and refuses later calls (FailedPrecondition).
  void Abort();

  // The standing error (OK while the group works).
  absl::Status broken() const;

  // One posted message (ucx_group.cc; public for UCX's C callbacks).
  struct Op;

 private:
  struct Peer {
    UcxGroup* group = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    // A ucs_status_t from the endpoint's error handler (UCS_OK: none).
    std::atomic<int> failed{0};
    // Set by a notice that the member left or stopped (the calling thread
    // only): the error a wait for its messages gets.
    absl::Status stopped;
    // The member left (a kLeft notice): a send to it still pending was
    // either taken before it left or never will be; its endpoint is closed
    // and the send counts as done.
    bool left = false;
  };
  // Closes `peer`'s endpoint (under the worker's lock), flushed or forced;
  // the close request is freed later (closing_).
  void CloseEndpoint(Peer& peer, bool force);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  uint64_t Tag(Channel channel, int sender) const;
  absl::Status Connect(int peer);  // under the worker's lock
  // Posts `sends` and `recvs` (appended to `ops`); an error leaves what it
  // posted in `ops` for the caller to cancel.
  absl::Status PostOps(absl::Span<const algorithms::SendSpec> sends,
                       absl::Span<const algorithms::RecvSpec> recvs,
                       std::vector<std::unique_ptr<Op>>& ops);
  // Waits for ops[first, last) and frees their requests; on an error cancels
  // every op of `ops` and returns it.
  absl::Status WaitFor(std::vector<std::unique_ptr<Op>>& ops, size_t first,
                       size_t last);
  absl::Status CheckHeaders(absl::Span<const std::unique_ptr<Op>> ops);
  // The abort's error, a disagreement notice's, that of a member whose
  // message `ops` still waits for and that stopped, left or failed, the
  // deadline's (naming who was late), or OK.
  absl::Status SlowPathCheck(absl::Span<const std::unique_ptr<Op>> ops);
  // The error of member `r` if it stopped, left or failed, else OK.
  absl::Status PeerError(int r);
  // Reads every queued notice: a disagreement is returned, a member that
  // left or stopped is marked (Peer::stopped). Under no lock.
  absl::Status ReadNotices();
  // Sends a notice to every other member this one has an endpoint to (or,
  // `connect_missing`, to every other member); best effort, never waited
  // for.
  void SendNotices(uint8_t type, int first_global, const CallRecord& first,
                   int other_global, const CallRecord& other,
                   absl::string_view reason = "",
                   bool connect_missing = false);
  void Cancel(std::vector<std::unique_ptr<Op>>& ops);
  absl::Status Fail(absl::Status error);  // sets broken_ once, returns it
  std::string Context() const;            // "ucx allreduce #3 along ..."

  UcxWorker* const worker_;
  const uint32_t id_;
  const int rank_;
  const std::vector<std::string> addresses_;
  const std::vector<int> global_ranks_;
  const absl::Duration timeout_;
  const std::string label_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by group rank; endpoints
                                              // made on first use
  Channel channel_ = Channel::kCollective;
  CallRecord call_;
  absl::Time deadline_;
  std::vector<std::unique_ptr<Op>> pending_notices_;  // sends in flight
  std::vector<std::unique_ptr<Op>> posted_;  // by Post, until WaitAll
  std::vector<void*> closing_;  // endpoint close requests, under the lock

  // This member sent (or passed on) a disagreement notice: its failure
  // needs no "stopped" notice.
  bool told_disagreement_ = false;
  int abort_fd_ = -1;  // an eventfd, written by Abort
  std::atomic<bool> aborted_{false};
  mutable sync_internal::Mutex broken_mu_;
  absl::Status broken_ ABSL_GUARDED_BY(broken_mu_);
};

}  // namespace ucx_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_UCX_UCX_GROUP_H_
