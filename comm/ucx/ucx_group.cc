// devmesh/comm/ucx/ucx_group.cc
#include "comm/ucx/ucx_group.h"

#include <sys/eventfd.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/call_check.h"
#include "comm/error_info.h"
#include "comm/ucx/ucx_status.h"

namespace devmesh {
namespace ucx_internal {
namespace {

constexpr uint32_t kHeaderMagic = 0x444d5558;  // "DMUX"
constexpr uint32_t kNoticeMagic = 0x444d554e;  // "DMUN"
constexpr uint64_t kSenderBits = 30;
constexpr size_t kUnknownLength = ~size_t{0};
constexpr uint64_t kFullMask = ~uint64_t{0};
// Matches every sender of one (group, channel).
constexpr uint64_t kAnySenderMask = ~((uint64_t{1} << kSenderBits) - 1);
// Spin on the worker (yielding the core between looks) this long before
// sleeping on its event fd.
constexpr absl::Duration kSpin = absl::Microseconds(50);
// The longest sleep between two looks at the abort flag, notices and failed
// endpoints (the abort's eventfd and the worker's event fd end it sooner).
constexpr absl::Duration kSlice = absl::Milliseconds(5);
// How long a failed call waits for UCX to end its messages after closing
// their endpoints (ucx_group.h).
constexpr absl::Duration kCancelLimit = absl::Seconds(1);
// How long a member whose receive was truncated waits for the notice of a
// member that knows both calls.
constexpr absl::Duration kTruncatedGrace = absl::Milliseconds(200);
// How long the destructor waits for its notices before closing endpoints.
constexpr absl::Duration kGoodbye = absl::Milliseconds(200);

struct WireHeader {
  uint32_t magic = 0;
  uint8_t kind = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t unused0 = 0;
  int32_t root = -1;
  uint32_t unused1 = 0;
  int64_t seq = 0;
  uint64_t count = 0;
};
static_assert(sizeof(WireHeader) == 32, "the header is 32 bytes on the wire");

// kTruncated: first_global received a longer message from other_global
// than its call (first) expects; other is not known.
enum NoticeType : uint8_t {
  kDisagreement = 1,
  kLeft = 2,
  kStopped = 3,
  kTruncated = 4
};

struct Notice {
  uint32_t magic = kNoticeMagic;
  uint8_t type = 0;
  uint8_t unused[3] = {0, 0, 0};
  int32_t first_global = -1;  // the reference member (lower group rank)
  int32_t other_global = -1;  // the member whose call differed; the leaver
  WireHeader first;
  WireHeader other;
  char reason[160] = {};  // kStopped: the member's error, for people
};

WireHeader ToWire(const CallRecord& call) {
  WireHeader h;
  h.magic = kHeaderMagic;
  h.kind = static_cast<uint8_t>(call.kind);
  h.dtype = static_cast<uint8_t>(call.dtype);
  h.op = static_cast<uint8_t>(call.op);
  h.root = call.root;
  h.seq = call.seq;
  h.count = call.count;
  return h;
}

CallRecord FromWire(const WireHeader& h) {
  CallRecord call;
  call.kind = static_cast<CallKind>(h.kind);
  call.dtype = static_cast<DataType>(h.dtype);
  call.op = static_cast<ReduceOp>(h.op);
  call.root = h.root;
  call.seq = h.seq;
  call.count = h.count;
  return call;
}

}  // namespace

struct UcxGroup::Op {
  bool is_send = false;
  int peer = -1;
  size_t expected = 0;  // a receive's bytes after the header
  void* request = nullptr;
  std::atomic<bool> done{false};
  ucs_status_t status = UCS_OK;
  size_t length = 0;  // a receive's bytes, header included, or kUnknownLength
  WireHeader header;
  Notice notice;  // a notice's body (the destructor's and SendNotices')
  ucp_dt_iov_t iov[2];
};

namespace {

void SendDone(void* /*request*/, ucs_status_t status, void* user_data) {
  auto* op = static_cast<UcxGroup::Op*>(user_data);
  op->status = status;
  op->done.store(true, std::memory_order_release);
}

void RecvDone(void* /*request*/, ucs_status_t status,
              const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<UcxGroup::Op*>(user_data);
  op->status = status;
  if (info != nullptr) op->length = info->length;
  op->done.store(true, std::memory_order_release);
}

// Records what ucp_*_nbx returned: done at once, failed at once, or pending.
void Posted(UcxGroup::Op* op, ucs_status_ptr_t r) {
  if (r == nullptr) {
    op->status = UCS_OK;
    op->done.store(true, std::memory_order_relaxed);
  } else if (UCS_PTR_IS_ERR(r)) {
    op->status = UCS_PTR_STATUS(r);
    op->done.store(true, std::memory_order_relaxed);
  } else {
    op->request = r;
  }
}

}  // namespace

UcxGroup::UcxGroup(UcxWorker* worker, uint32_t id, int rank,
                   std::vector<std::string> addresses,
                   std::vector<int> global_ranks, absl::Duration timeout,
                   std::string label)
    : worker_(worker),
      id_(id),
      rank_(rank),
      addresses_(std::move(addresses)),
      global_ranks_(std::move(global_ranks)),
      timeout_(timeout),
      label_(std::move(label)) {
  peers_.reserve(addresses_.size());
  for (int r = 0; r < static_cast<int>(addresses_.size()); ++r) {
    auto peer = std::make_unique<Peer>();
    peer->group = this;
    peer->rank = r;
    peers_.push_back(std::move(peer));
  }
  abort_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

UcxGroup::~UcxGroup() {
  // Goodbye notices to the members this one talked to, unless it failed.
  std::vector<std::unique_ptr<Op>> byes;
  {
    std::lock_guard<std::mutex> lock(worker_->mu());
    for (auto& peer : peers_) {
      if (peer->ep == nullptr || peer->failed.load() != 0) continue;
      auto op = std::make_unique<Op>();
      op->is_send = true;
      op->peer = peer->rank;
      op->notice.type = kLeft;
      op->notice.other_global = global_ranks_[rank_];
      ucp_request_param_t param = {};
      param.op_attr_mask =
          UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      param.cb.send = SendDone;
      param.user_data = op.get();
      Posted(op.get(), ucp_tag_send_nbx(peer->ep, &op->notice,
                                         sizeof(Notice),
                                         Tag(Channel::kNotice, rank_),
                                         &param));
      byes.push_back(std::move(op));
    }
  }
  for (auto& op : pending_notices_) byes.push_back(std::move(op));
  const absl::Time until = absl::Now() + kGoodbye;
  auto all_done = [&] {
    for (auto& op : byes) {
      if (!op->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  while (!all_done() && absl::Now() < until) {
    if (worker_->Progress() == 0) worker_->Sleep(-1, absl::Milliseconds(1));
  }
  // Close every endpoint (forced: a peer that is gone cannot confirm).
  {
    std::lock_guard<std::mutex> lock(worker_->mu());
    // Flushed, unless UCX reported the endpoint failed (UCX 1.13's TCP
    // transport aborted on an assertion when a forced close met a
    // connection that was still being made or had been refused).
    for (auto& peer : peers_) CloseEndpoint(*peer, peer->failed.load() != 0);
  }
  const absl::Time close_until = absl::Now() + absl::Seconds(1);
  for (void* r : closing_) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(worker_->mu());
        if (ucp_request_check_status(r) != UCS_INPROGRESS) {
          ucp_request_free(r);
          break;
        }
        ucp_worker_progress(worker_->handle());
      }
      if (absl::Now() > close_until) break;  // leave it to UCX
    }
  }
  // Sends still pending after the endpoints closed completed with an error
  // (or will, inside UCX): their Ops must outlive any callback.
  {
    std::lock_guard<std::mutex> lock(worker_->mu());
    for (auto& op : byes) {
      if (op->done.load(std::memory_order_acquire)) {
        if (op->request != nullptr) ucp_request_free(op->request);
      } else {
        op.release();  // a callback may still come; keep its Op alive
      }
    }
  }
  if (abort_fd_ >= 0) close(abort_fd_);
}

uint64_t UcxGroup::Tag(Channel channel, int sender) const {
  return (uint64_t{id_} << 32) | (uint64_t{static_cast<uint32_t>(channel)}
                                  << kSenderBits) |
         static_cast<uint64_t>(sender);
}

void UcxGroup::OnEndpointError(void* arg, ucp_ep_h /*ep*/,
                               ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  int expected = 0;
  peer->failed.compare_exchange_strong(expected, static_cast<int>(status));
}

absl::Status UcxGroup::Connect(int peer_rank) {
  Peer& peer = *peers_[peer_rank];
  if (peer.ep != nullptr) return absl::OkStatus();
  ucp_ep_params_t params = {};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address =
      reinterpret_cast<const ucp_address_t*>(addresses_[peer_rank].data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxGroup::OnEndpointError;
  params.err_handler.arg = &peer;
  ucs_status_t st = ucp_ep_create(worker_->handle(), &params, &peer.ep);
  if (st != UCS_OK) {
    peer.ep = nullptr;
    return WithPeer(UcxStatus(st, absl::StrCat(Context(),
                                               ": no endpoint to global rank ",
                                               global_ranks_[peer_rank])),
                    global_ranks_[peer_rank]);
  }
  return absl::OkStatus();
}

absl::Status UcxGroup::broken() const {
  std::lock_guard<std::mutex> lock(broken_mu_);
  return broken_;
}

absl::Status UcxGroup::Fail(absl::Status error) {
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
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

void UcxGroup::Abort() {
  aborted_.store(true);
  const uint64_t one = 1;
  if (abort_fd_ >= 0) (void)!write(abort_fd_, &one, sizeof(one));
}

std::string UcxGroup::Context() const {
  std::string context = absl::StrCat("ucx ", CallKindName(call_.kind));
  if (channel_ == Channel::kCollective) {
    absl::StrAppend(&context, " #", call_.seq);
  } else if (channel_ == Channel::kSplit) {
    context = "ucx split";
  }
  if (!label_.empty()) absl::StrAppend(&context, " along ", label_);
  return context;
}

void UcxGroup::CloseEndpoint(Peer& peer, bool force) {
  if (peer.ep == nullptr) return;
  ucp_request_param_t param = {};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
  if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing_.push_back(r);
  peer.ep = nullptr;
}

absl::Status UcxGroup::Begin(Channel channel, const CallRecord& call) {
  channel_ = channel;
  call_ = call;
  deadline_ = absl::Now() + timeout_;
  if (absl::Status b = broken(); !b.ok()) return b;
  if (aborted_.load()) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat(Context(), ": the communicator was aborted")));
  }
  if (absl::Status n = ReadNotices(); !n.ok()) return Fail(std::move(n));
  return absl::OkStatus();
}

absl::Status UcxGroup::Exchange(absl::Span<const algorithms::SendSpec> sends,
                                absl::Span<const algorithms::RecvSpec> recvs) {
  if (absl::Status b = broken(); !b.ok()) return b;
  std::vector<std::unique_ptr<Op>> ops;
  ops.reserve(sends.size() + recvs.size());
  const WireHeader header = ToWire(call_);
  // A member known to have left or stopped takes nothing more: a send to
  // it fails now, without a fresh endpoint to it. (What it sent before it
  // left is still received: a receive from it is posted, with no endpoint
  // made toward it.)
  for (const algorithms::SendSpec& sp : sends) {
    if (!peers_[sp.peer]->stopped.ok()) return Fail(peers_[sp.peer]->stopped);
  }
  absl::Status connect;
  {
    std::lock_guard<std::mutex> lock(worker_->mu());
    for (const algorithms::SendSpec& s : sends) {
      if (connect.ok()) connect = Connect(s.peer);
    }
    for (const algorithms::RecvSpec& r : recvs) {
      // An endpoint toward the sender too: its failure is how a dead
      // sender is noticed.
      if (connect.ok() && peers_[r.peer]->stopped.ok()) {
        connect = Connect(r.peer);
      }
    }
  }
  // Fail (which sends notices) never runs under the worker's lock.
  if (!connect.ok()) return Fail(std::move(connect));
  {
    std::lock_guard<std::mutex> lock(worker_->mu());
    for (const algorithms::RecvSpec& r : recvs) {
      auto op = std::make_unique<Op>();
      op->peer = r.peer;
      op->expected = r.bytes;
      op->iov[0] = {&op->header, sizeof(WireHeader)};
      op->iov[1] = {r.data, r.bytes};
      ucp_tag_recv_info_t info = {};
      ucp_request_param_t param = {};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                           UCP_OP_ATTR_FIELD_USER_DATA |
                           UCP_OP_ATTR_FIELD_DATATYPE |
                           UCP_OP_ATTR_FIELD_RECV_INFO;
      param.cb.recv = RecvDone;
      param.user_data = op.get();
      param.datatype = ucp_dt_make_iov();
      param.recv_info.tag_info = &info;
      Posted(op.get(), ucp_tag_recv_nbx(worker_->handle(), op->iov,
                                         r.bytes > 0 ? 2 : 1,
                                         Tag(channel_, r.peer), kFullMask,
                                         &param));
      // UCX 1.13 leaves tag_info unset when an IOV receive completes at
      // once from its unexpected queue: the length is then unknown (the
      // header, compared below, tells a different call).
      if (op->done.load(std::memory_order_relaxed) && op->status == UCS_OK) {
        op->length = info.length > 0 ? info.length : kUnknownLength;
      }
      ops.push_back(std::move(op));
    }
    for (const algorithms::SendSpec& s : sends) {
      auto op = std::make_unique<Op>();
      op->is_send = true;
      op->peer = s.peer;
      op->header = header;
      op->iov[0] = {&op->header, sizeof(WireHeader)};
      op->iov[1] = {const_cast<void*>(s.data), s.bytes};
      ucp_request_param_t param = {};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                           UCP_OP_ATTR_FIELD_USER_DATA |
                           UCP_OP_ATTR_FIELD_DATATYPE;
      param.cb.send = SendDone;
      param.user_data = op.get();
      param.datatype = ucp_dt_make_iov();
      Posted(op.get(), ucp_tag_send_nbx(peers_[s.peer]->ep, op->iov,
                                         s.bytes > 0 ? 2 : 1,
                                         Tag(channel_, rank_), &param));
      ops.push_back(std::move(op));
    }
  }
  if (absl::Status w = Wait(ops); !w.ok()) return w;
  return CheckHeaders(ops);
}

absl::Status UcxGroup::Wait(std::vector<std::unique_ptr<Op>>& ops) {
  auto all_done = [&ops] {
    for (const auto& op : ops) {
      if (!op->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  absl::Time spin_until = absl::InfinitePast();
  absl::Time next_check = absl::Now() + kSlice;
  while (!all_done()) {
    const unsigned events = worker_->Progress();
    if (all_done()) break;
    if (events > 0) {
      // The worker is shared: another group's traffic keeps it busy, and
      // the deadline, Abort and dead members must still be looked at.
      if (absl::Now() < next_check) continue;
      next_check = absl::Now() + kSlice;
      if (absl::Status s = SlowPathCheck(ops); !s.ok()) {
        Cancel(ops);
        return Fail(std::move(s));
      }
      continue;
    }
    const absl::Time now = absl::Now();
    if (spin_until == absl::InfinitePast()) spin_until = now + kSpin;
    if (now < spin_until) {
      // Let a peer that shares this core run (a cross-host pair whose ranks
      // sit on one core each side: 73 -> 17 us at 1 KiB on loopback).
      sched_yield();
      continue;
    }
    if (absl::Status s = SlowPathCheck(ops); !s.ok()) {
      Cancel(ops);
      return Fail(std::move(s));
    }
    worker_->Sleep(abort_fd_, std::min(kSlice, deadline_ - now));
  }
  std::lock_guard<std::mutex> lock(worker_->mu());
  for (auto& op : ops) {
    if (op->request != nullptr) {
      ucp_request_free(op->request);
      op->request = nullptr;
    }
  }
  return absl::OkStatus();
}

absl::Status UcxGroup::PeerError(int r) {
  Peer& peer = *peers_[r];
  if (!peer.stopped.ok()) return peer.stopped;
  const int failed = peer.failed.load();
  if (failed == 0) return absl::OkStatus();
  // A member that left or stopped says so before its connection closes;
  // read that notice if it is here by now.
  worker_->Progress();
  if (absl::Status n = ReadNotices(); !n.ok()) return n;
  if (!peer.stopped.ok()) return peer.stopped;
  const int global = global_ranks_[r];
  return WithPeer(
      absl::UnavailableError(absl::StrCat(
          Context(), ": the connection to global rank ", global, " failed (",
          ucs_status_string(static_cast<ucs_status_t>(failed)),
          "): its process is gone or its host cannot be reached")),
      global);
}

absl::Status UcxGroup::SlowPathCheck(
    const std::vector<std::unique_ptr<Op>>& ops) {
  if (aborted_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Context(), ": the communicator was aborted"));
  }
  if (absl::Status n = ReadNotices(); !n.ok()) return n;
  for (const auto& op : ops) {
    if (op->done.load(std::memory_order_acquire)) continue;
    Peer& peer = *peers_[op->peer];
    // A send to a member that left: it was taken before it left, or its
    // connection's close ends it with an error that counts as done
    // (CheckHeaders); the deadline bounds it either way.
    if (op->is_send && peer.left) continue;
    if (absl::Status p = PeerError(op->peer); !p.ok()) return p;
  }
  if (absl::Now() >= deadline_) {
    std::vector<int> late_senders, late_receivers;
    for (const auto& op : ops) {
      if (op->done.load(std::memory_order_acquire)) continue;
      (op->is_send ? late_receivers : late_senders)
          .push_back(global_ranks_[op->peer]);
    }
    std::string who;
    if (!late_senders.empty()) {
      who = absl::StrCat("no message from global rank(s) [",
                         absl::StrJoin(late_senders, ", "), "]");
    } else {
      who = absl::StrCat("global rank(s) [",
                         absl::StrJoin(late_receivers, ", "),
                         "] did not take this rank's message");
    }
    absl::Status error = absl::DeadlineExceededError(absl::StrCat(
        Context(), ": ", who, " within the group's timeout of ",
        absl::FormatDuration(timeout_),
        "; the group refuses every later call"));
    const std::vector<int>& late =
        late_senders.empty() ? late_receivers : late_senders;
    if (late.size() == 1) error = WithPeer(std::move(error), late[0]);
    return error;
  }
  return absl::OkStatus();
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

absl::Status UcxGroup::CheckHeaders(std::vector<std::unique_ptr<Op>>& ops) {
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

void UcxGroup::Cancel(std::vector<std::unique_ptr<Op>>& ops) {
  auto all_done = [&ops] {
    for (const auto& op : ops) {
      if (!op->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  {
    std::lock_guard<std::mutex> lock(worker_->mu());
    for (auto& op : ops) {
      if (op->done.load(std::memory_order_acquire)) continue;
      // A receive not yet matched is cancelled; a send cannot be.
      if (!op->is_send) ucp_request_cancel(worker_->handle(), op->request);
    }
  }
  // A receive already matched (a large message arriving) cannot be
  // cancelled, and a send only ends with its endpoint: close the endpoints
  // of what is left (forced: the group is broken), so that UCX ends the
  // sends and no more data arrives for the receives (a receive's
  // connection is the one of the endpoint toward its sender).
  for (int round = 0; round < 2 && !all_done(); ++round) {
    const absl::Time until = absl::Now() + absl::Milliseconds(100);
    while (!all_done() && absl::Now() < until) worker_->Progress();
    if (all_done()) break;
    std::lock_guard<std::mutex> lock(worker_->mu());
    for (auto& op : ops) {
      if (!op->done.load(std::memory_order_acquire)) {
        CloseEndpoint(*peers_[op->peer], /*force=*/true);
      }
    }
  }
  const absl::Time until = absl::Now() + kCancelLimit;
  while (!all_done() && absl::Now() < until) {
    if (worker_->Progress() == 0) {
      worker_->Sleep(-1, absl::Milliseconds(1));
    }
  }
  // What UCX still holds now is a receive it matched and whose sender's
  // rest never came (a sender killed or stopped mid-message): its
  // connection is closed with the endpoint toward that sender (UCX's TCP
  // transport carries both directions of a pair on one connection), so
  // nothing more arrives for it. Its Op stays alive for UCX.
  std::lock_guard<std::mutex> lock(worker_->mu());
  for (auto& op : ops) {
    if (!op->done.load(std::memory_order_acquire)) {
      op.release();  // UCX may still hold it; never completed, never freed
    } else if (op->request != nullptr) {
      ucp_request_free(op->request);
    }
  }
  ops.clear();
}

}  // namespace ucx_internal
}  // namespace devmesh
