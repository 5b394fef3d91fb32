// devmesh/comm/ucx/ucx_group_checks.cc
// UcxGroup's per-call check and notices (ucx_group.h): the headers of a
// call's messages compared with this member's call, the notices a member
// sends when it finds a disagreement, leaves or stops, and reading them.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/call_check.h"
#include "comm/error_info.h"
#include "comm/ucx/ucx_group.h"
#include "comm/ucx/ucx_status.h"
#include "comm/ucx/ucx_wire.h"
#include "status/status_macros.h"

namespace devmesh {
namespace ucx_internal {
namespace {

// How long a member whose receive was truncated waits for the notice of a
// member that knows both calls.
constexpr absl::Duration kTruncatedGrace = absl::Milliseconds(200);

}  // namespace

absl::Status UcxGroup::Fail(absl::Status error) {
  {
    sync_internal::MutexLock lock(&broken_mu_);
    if (!broken_.ok()) return broken_;
    broken_ = error;
  }
  // Tell the others, so that a member waiting for this one's messages fails
  // at once (unless this member sent or passed on a disagreement notice).
  if (!told_disagreement_) {
    SendNotices(kStopped, -1, CallRecord(), global_ranks_[rank_], CallRecord(),
                error.message());
  }
  return error;
}

absl::Status UcxGroup::PeerError(int r) {
  Peer& peer = *peers_[r];
  if (!peer.stopped.ok()) return peer.stopped;
  const int failed = peer.failed.load();
  if (failed == 0) return absl::OkStatus();
  // A member that left or stopped says so before its connection closes;
  // read that notice if it is here by now.
  worker_->Progress();
  DEVMESH_RETURN_IF_ERROR(ReadNotices());
  if (!peer.stopped.ok()) return peer.stopped;
  const int global = global_ranks_[r];
  return WithPeer(
      absl::UnavailableError(absl::StrCat(
          Context(), ": the connection to global rank ", global, " failed (",
          ucs_status_string(static_cast<ucs_status_t>(failed)),
          "): its process is gone or its host cannot be reached")),
      global);
}

absl::Status UcxGroup::ReadNotices() {
  for (;;) {
    // On the heap: if UCX does not finish the receive in time, the Op is
    // left to it (a stack Op could be written after this returns).
    auto owned = std::make_unique<Op>();
    Op& op = *owned;
    Notice& notice = op.notice;
    {
      std::lock_guard<std::mutex> lock(worker_->mu());
      ucp_tag_recv_info_t info = {};
      ucp_tag_message_h message =
          ucp_tag_probe_nb(worker_->handle(), Tag(Channel::kNotice, 0),
                           kAnySenderMask, /*remove=*/1, &info);
      if (message == nullptr) return absl::OkStatus();
      ucp_request_param_t param = {};
      param.op_attr_mask =
          UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      param.cb.recv = RecvDone;
      param.user_data = &op;
      Posted(&op, ucp_tag_msg_recv_nbx(worker_->handle(), &notice,
                                        sizeof(notice), message, &param));
    }
    // A probed message is here: its receive ends at once, or soon.
    const absl::Time until = absl::Now() + absl::Seconds(1);
    while (!op.done.load(std::memory_order_acquire)) {
      if (absl::Now() > until) {
        owned.release();  // UCX may still complete it
        return absl::InternalError(absl::StrCat(
            Context(), ": a notice's receive did not end within 1s"));
      }
      worker_->Progress();
    }
    if (op.request != nullptr) {
      std::lock_guard<std::mutex> lock(worker_->mu());
      ucp_request_free(op.request);
    }
    if (op.status != UCS_OK || notice.magic != kNoticeMagic) {
      return absl::InternalError(
          absl::StrCat(Context(), ": a malformed notice arrived"));
    }
    if (notice.type == kDisagreement || notice.type == kTruncated) {
      // Passed on once (the group is broken from here on), so that a member
      // this one reaches first hears it before this one's goodbye.
      SendNotices(notice.type, notice.first_global, FromWire(notice.first),
                  notice.other_global, FromWire(notice.other));
      if (notice.type == kTruncated) {
        // first_global received the longer message from other_global; the
        // member of higher group rank is the one that differs.
        const auto first_at = std::find(global_ranks_.begin(),
                                         global_ranks_.end(),
                                         notice.first_global);
        const auto other_at = std::find(global_ranks_.begin(),
                                        global_ranks_.end(),
                                        notice.other_global);
        const int disagreeing = first_at < other_at ? notice.other_global
                                                    : notice.first_global;
        return WithDisagreement(
            absl::InvalidArgumentError(absl::StrCat(
                Context(), ": global rank ", notice.first_global,
                " received a longer message from global rank ",
                notice.other_global, " than its call (",
                DescribeCall(FromWire(notice.first)),
                ") expects, so their calls differ (group of global ranks [",
                absl::StrJoin(global_ranks_, ", "),
                "]); the group refuses every later call")),
            disagreeing);
      }
      return CallMismatchError("ucx", notice.first_global,
                               FromWire(notice.first), notice.other_global,
                               FromWire(notice.other), global_ranks_, label_);
    }
    // Left or stopped: mark the member.
    const int global = notice.other_global;
    auto it = std::find(global_ranks_.begin(), global_ranks_.end(), global);
    if (it == global_ranks_.end()) continue;
    Peer& peer = *peers_[it - global_ranks_.begin()];
    if (!peer.stopped.ok()) continue;
    if (notice.type == kLeft) {
      peer.left = true;
      peer.stopped = WithPeerLeft(
          absl::UnavailableError(absl::StrCat(
              Context(), ": global rank ", global,
              " left the group (it destroyed its communicator)")),
          global);
    } else {
      notice.reason[sizeof(notice.reason) - 1] = '\0';
      peer.stopped = WithPeer(
          absl::UnavailableError(absl::StrCat(
              Context(), ": global rank ", global,
              " stopped: its call failed (", notice.reason, ")")),
          global);
    }
  }
}

absl::Status UcxGroup::CheckHeaders(
    absl::Span<const std::unique_ptr<Op>> ops) {
  for (const auto& op : ops) {
    if (op->status == UCS_OK || op->status == UCS_ERR_MESSAGE_TRUNCATED) {
      continue;
    }
    // A failed message: what the other members said comes first (a
    // disagreement, a member that left or stopped), then the member's own
    // failure.
    if (absl::Status n = ReadNotices(); !n.ok()) return Fail(std::move(n));
    Peer& peer = *peers_[op->peer];
    if (op->is_send && peer.left) continue;  // taken before it left, or never
    if (absl::Status p = PeerError(op->peer); !p.ok()) return Fail(std::move(p));
    const int global = global_ranks_[op->peer];
    return Fail(WithPeer(
        absl::UnavailableError(absl::StrCat(
            Context(), ": the message ", op->is_send ? "to" : "from",
            " global rank ", global, " failed (",
            ucs_status_string(op->status),
            "): its process is gone or its host cannot be reached")),
        global));
  }
  for (const auto& op : ops) {
    if (op->is_send) continue;
    const int global = global_ranks_[op->peer];
    const CallRecord mine = call_;
    if (op->status == UCS_ERR_MESSAGE_TRUNCATED &&
        channel_ == Channel::kPointToPoint) {
      return Fail(WithDisagreement(
          absl::InvalidArgumentError(absl::StrCat(
              Context(), " from global rank ", global,
              ": it sent more than this rank receives (",
              DataTypeName(mine.dtype), " x ", mine.count, ")")),
          global));
    }
    if (op->status == UCS_ERR_MESSAGE_TRUNCATED) {
      // The sender's message is longer than this call's: their calls
      // differ. UCX 1.13 delivers nothing of a truncated message, so the
      // sender's record is not known here; a member that received a
      // shorter message knows both and says so. Wait a little for that
      // notice, so that every member words the error alike.
      const absl::Time until = absl::Now() + kTruncatedGrace;
      while (absl::Now() < until) {
        if (worker_->Progress() == 0) {
          worker_->Sleep(abort_fd_, absl::Milliseconds(1));
        }
        if (absl::Status n = ReadNotices(); !n.ok()) {
          return Fail(std::move(n));
        }
      }
      // The member of higher group rank is the one that differs (as below).
      const int disagreeing =
          rank_ < op->peer ? global : global_ranks_[rank_];
      absl::Status error = WithDisagreement(
          absl::InvalidArgumentError(absl::StrCat(
              Context(), ": the message of global rank ", global,
              " is longer than global rank ", global_ranks_[rank_],
              " (this rank) expects for its call (", DescribeCall(mine),
              "), so their calls differ (",
              "group of global ranks [", absl::StrJoin(global_ranks_, ", "),
              "]); the group refuses every later call")),
          disagreeing);
      SendNotices(kTruncated, global_ranks_[rank_], mine, global, CallRecord(),
                  "", /*connect_missing=*/true);
      return Fail(std::move(error));
    }
    if (op->length < sizeof(WireHeader) || op->header.magic != kHeaderMagic) {
      return Fail(WithPeer(
          absl::InternalError(absl::StrCat(
              Context(), ": a message from global rank ", global,
              " is not a devmesh message (", op->length, " bytes)")),
          global));
    }
    const CallRecord theirs = FromWire(op->header);
    bool same;
    if (channel_ == Channel::kPointToPoint) {
      same = theirs.kind == CallKind::kSend && theirs.dtype == mine.dtype &&
             theirs.count == mine.count;
    } else {
      same = SameCall(theirs, mine);
    }
    if (same && (op->length == kUnknownLength ||
                 op->length == sizeof(WireHeader) + op->expected)) {
      continue;
    }
    if (channel_ == Channel::kPointToPoint) {
      return Fail(WithDisagreement(
          absl::InvalidArgumentError(absl::StrCat(
              Context(), " from global rank ", global, ": it sent ",
              DataTypeName(theirs.dtype), " x ", theirs.count,
              ", this rank receives ", DataTypeName(mine.dtype), " x ",
              mine.count)),
          global));
    }
    // The member of lower group rank is the reference, so that every member
    // words the error alike.
    const int mine_global = global_ranks_[rank_];
    const bool mine_first = rank_ < op->peer;
    const int first_global = mine_first ? mine_global : global;
    const int other_global = mine_first ? global : mine_global;
    const CallRecord& first = mine_first ? mine : theirs;
    const CallRecord& other = mine_first ? theirs : mine;
    SendNotices(kDisagreement, first_global, first, other_global, other, "",
                /*connect_missing=*/true);
    return Fail(CallMismatchError("ucx", first_global, first, other_global,
                                  other, global_ranks_, label_));
  }
  return absl::OkStatus();
}

void UcxGroup::SendNotices(uint8_t type, int first_global,
                           const CallRecord& first, int other_global,
                           const CallRecord& other, absl::string_view reason,
                           bool connect_missing) {
  if (type == kDisagreement || type == kTruncated) told_disagreement_ = true;
  std::lock_guard<std::mutex> lock(worker_->mu());
  for (int r = 0; r < size(); ++r) {
    // A fresh endpoint only when asked (the member that found a
    // disagreement, while the call is on and the members alive): one to a
    // member that had exited made UCX 1.13 abort on an assertion in its TCP
    // transport at the endpoint's close. Otherwise only members this one
    // already talks to (a member that waits for this one has an endpoint
    // to it, and this one to it: ucx_group.h, endpoints toward senders).
    if (r == rank_ || peers_[r]->failed.load() != 0 ||
        !peers_[r]->stopped.ok()) {
      continue;
    }
    if (peers_[r]->ep == nullptr && (!connect_missing || !Connect(r).ok())) {
      continue;
    }
    auto op = std::make_unique<Op>();
    op->is_send = true;
    op->peer = r;
    op->notice.type = type;
    op->notice.first_global = first_global;
    op->notice.other_global = other_global;
    op->notice.first = ToWire(first);
    op->notice.other = ToWire(other);
    const size_t n = std::min(reason.size(), sizeof(op->notice.reason) - 1);
    std::memcpy(op->notice.reason, reason.data(), n);
    ucp_request_param_t param = {};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = SendDone;
    param.user_data = op.get();
    Posted(op.get(), ucp_tag_send_nbx(peers_[r]->ep, &op->notice,
                                       sizeof(Notice),
                                       Tag(Channel::kNotice, rank_), &param));
    pending_notices_.push_back(std::move(op));
  }
}

}  // namespace ucx_internal
}  // namespace devmesh
