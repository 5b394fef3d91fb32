// devmesh/comm/ucx/ucx_group.cc
#include "comm/ucx/ucx_group.h"

#include <sched.h>
#include <sys/eventfd.h>
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
#include "comm/ucx/ucx_wire.h"
#include "status/status_macros.h"

namespace devmesh {
namespace ucx_internal {
namespace {

// Spin on the worker (yielding the core between looks) this long before
// sleeping on its event fd.
constexpr absl::Duration kSpin = absl::Microseconds(50);
// The longest sleep between two looks at the abort flag, notices and failed
// endpoints (the abort's eventfd and the worker's event fd end it sooner),
// while a wait is short; a wait that has lasted t sleeps up to t / 8 at a
// time, at most kLongSlice (a rank waiting seconds for a late peer looks 20
// times a second, not 200: 1024 such ranks on 2 cores).
constexpr absl::Duration kSlice = absl::Milliseconds(5);
constexpr absl::Duration kLongSlice = absl::Milliseconds(50);
// Wakes from the worker's event fd in a row that found nothing to progress
// before the wait naps without that fd (UcxWorker::Sleep's watch_worker).
// While a peer has not yet answered a connection UCX 1.13's fd can stay
// readable: each sleep then returned at once, and 512 ranks waiting in their
// first all-reduce for peers late from the store made 450k polls a second
// (perf stat -a during tools/scale_check.sh --hosts=8 --mesh=32x16
// --store=etcd; perf record: UcxGroup::WaitFor -> UcxWorker::Sleep -> poll).
constexpr int kEmptyWakes = 4;
// How long a failed call waits for UCX to end its messages after closing
// their endpoints (ucx_group.h).
constexpr absl::Duration kCancelLimit = absl::Seconds(1);
// How long the destructor waits for its notices before closing endpoints.
constexpr absl::Duration kGoodbye = absl::Milliseconds(200);

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
  if (!posted_.empty()) Cancel(posted_);
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
  sync_internal::MutexLock lock(&broken_mu_);
  return broken_;
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
  DEVMESH_RETURN_IF_ERROR(broken());
  if (aborted_.load()) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat(Context(), ": the communicator was aborted")));
  }
  if (absl::Status n = ReadNotices(); !n.ok()) return Fail(std::move(n));
  return absl::OkStatus();
}

absl::Status UcxGroup::Exchange(absl::Span<const algorithms::SendSpec> sends,
                                absl::Span<const algorithms::RecvSpec> recvs) {
  DEVMESH_RETURN_IF_ERROR(broken());
  std::vector<std::unique_ptr<Op>> ops;
  ops.reserve(sends.size() + recvs.size());
  if (absl::Status s = PostOps(sends, recvs, ops); !s.ok()) {
    Cancel(ops);
    return s;
  }
  DEVMESH_RETURN_IF_ERROR(WaitFor(ops, 0, ops.size()));
  return CheckHeaders(ops);
}

absl::StatusOr<algorithms::Ticket> UcxGroup::Post(
    const algorithms::SendSpec& send) {
  DEVMESH_RETURN_IF_ERROR(broken());
  if (absl::Status s = PostOps({&send, 1}, {}, posted_); !s.ok()) {
    Cancel(posted_);
    return s;
  }
  return posted_.size() - 1;
}

absl::StatusOr<algorithms::Ticket> UcxGroup::Post(
    const algorithms::RecvSpec& recv) {
  DEVMESH_RETURN_IF_ERROR(broken());
  if (absl::Status s = PostOps({}, {&recv, 1}, posted_); !s.ok()) {
    Cancel(posted_);
    return s;
  }
  return posted_.size() - 1;
}

absl::Status UcxGroup::Wait(algorithms::Ticket ticket) {
  if (ticket >= posted_.size()) {
    Cancel(posted_);
    return Fail(absl::InternalError(absl::StrCat(
        Context(), ": Wait for message ", ticket, " of ", posted_.size(),
        " posted")));
  }
  DEVMESH_RETURN_IF_ERROR(WaitFor(posted_, ticket, ticket + 1));
  if (absl::Status s = CheckHeaders({&posted_[ticket], 1}); !s.ok()) {
    Cancel(posted_);
    return s;
  }
  return absl::OkStatus();
}

absl::Status UcxGroup::WaitAll() {
  DEVMESH_RETURN_IF_ERROR(WaitFor(posted_, 0, posted_.size()));
  absl::Status s = CheckHeaders(posted_);
  Cancel(posted_);  // every op is done: frees what is left, clears
  return s;
}

absl::Status UcxGroup::PostOps(absl::Span<const algorithms::SendSpec> sends,
                               absl::Span<const algorithms::RecvSpec> recvs,
                               std::vector<std::unique_ptr<Op>>& ops) {
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
  return absl::OkStatus();
}

absl::Status UcxGroup::WaitFor(std::vector<std::unique_ptr<Op>>& ops,
                               size_t first, size_t last) {
  const absl::Span<const std::unique_ptr<Op>> waited =
      absl::MakeConstSpan(ops).subspan(first, last - first);
  auto all_done = [&waited] {
    for (const auto& op : waited) {
      if (!op->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  absl::Time spin_until = absl::InfinitePast();
  absl::Time next_check = absl::Now() + kSlice;
  // Since when the worker has had nothing to progress, and how many wakes
  // from its event fd in a row found nothing.
  absl::Time idle_since = absl::InfinitePast();
  int empty_wakes = 0;
  bool woken_by_worker = false;
  while (!all_done()) {
    const unsigned events = worker_->Progress();
    if (all_done()) break;
    const absl::Time now = absl::Now();
    const bool idle = events == 0;
    if (idle) {
      if (spin_until == absl::InfinitePast()) spin_until = now + kSpin;
      if (idle_since == absl::InfinitePast()) idle_since = now;
      if (woken_by_worker) ++empty_wakes;
      if (now < spin_until) {
        // Let a peer that shares this core run (a cross-host pair whose
        // ranks sit on one core each side: 73 -> 17 us at 1 KiB on
        // loopback).
        sched_yield();
        continue;
      }
    } else {
      idle_since = absl::InfinitePast();
      empty_wakes = 0;
      if (now < next_check) continue;
    }
    woken_by_worker = false;
    // Idle past the spin, or busy for a slice (the worker is shared: another
    // group's traffic keeps it busy, and the deadline, Abort and dead
    // members must still be looked at).
    next_check = now + kSlice;
    if (absl::Status s = SlowPathCheck(waited); !s.ok()) {
      Cancel(ops);
      return Fail(std::move(s));
    }
    if (idle) {
      const absl::Duration waited = now - idle_since;
      const absl::Duration left = deadline_ - now;
      if (empty_wakes < kEmptyWakes) {
        woken_by_worker = worker_->Sleep(
            abort_fd_,
            std::min(std::clamp(waited / 8, kSlice, kLongSlice), left));
      } else {
        // The worker's fd keeps waking this wait for nothing: nap without
        // it, an eighth of the wait so far (a message that came meanwhile
        // waits at most that), then look at the worker again.
        worker_->Sleep(abort_fd_,
                       std::min(std::clamp(waited / 8, absl::Microseconds(100),
                                           kLongSlice),
                                left),
                       /*watch_worker=*/false);
        empty_wakes = kEmptyWakes - 1;  // one more empty wake: nap again
      }
    }
  }
  std::lock_guard<std::mutex> lock(worker_->mu());
  for (const auto& op : waited) {
    if (op->request != nullptr) {
      ucp_request_free(op->request);
      op->request = nullptr;
    }
  }
  return absl::OkStatus();
}

absl::Status UcxGroup::SlowPathCheck(
    absl::Span<const std::unique_ptr<Op>> ops) {
  if (aborted_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Context(), ": the communicator was aborted"));
  }
  DEVMESH_RETURN_IF_ERROR(ReadNotices());
  for (const auto& op : ops) {
    if (op->done.load(std::memory_order_acquire)) continue;
    Peer& peer = *peers_[op->peer];
    // A send to a member that left: it was taken before it left, or its
    // connection's close ends it with an error that counts as done
    // (CheckHeaders); the deadline bounds it either way.
    if (op->is_send && peer.left) continue;
    DEVMESH_RETURN_IF_ERROR(PeerError(op->peer));
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
