#include "store/store_service.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

std::string OkReply() {
  WireWriter w;
  w.U8(0);
  return std::move(w).Finish();
}

// Compares without an early exit, so timing does not leak the token.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// The timeout of a Get/Wait/MultiGet payload (its last field), or -1 when
// the payload is too short to hold one (the decoder then says why).
int64_t PeekTimeout(absl::string_view payload) {
  if (payload.size() < 1 + 8) return -1;
  WireReader tail(payload.substr(payload.size() - 8));
  int64_t timeout = -1;
  tail.I64(&timeout);
  return timeout;
}

StoreService::Outcome SecondPark() {
  return {EncodeErrorReply(absl::FailedPreconditionError(
              "a request that waits (Get, Wait, MultiGet with a timeout, or "
              "a barrier) arrived while another request of this connection "
              "was still waiting; one may wait at a time per connection")),
          true, -1};
}

}  // namespace

StoreService::Outcome StoreService::Handle(ClientId client,
                                           absl::string_view payload) {
  const Op op = payload.empty() ? Op::kHello : static_cast<Op>(payload[0]);
  const bool greeted = greeted_.contains(client);
  if ((op == Op::kGet || op == Op::kWait || op == Op::kMultiGet) && greeted &&
      PeekTimeout(payload) != 0) {
    if (IsParked(client)) return SecondPark();
    return Park(client, payload);  // decodes its own copy, once
  }
  absl::StatusOr<Request> request = DecodeRequest(payload);
  if (!request.ok()) {
    return {EncodeErrorReply(request.status()), true, -1};
  }
  if (!greeted) return HandleHello(client, *request);
  switch (request->op) {
    case Op::kHello:
      return {EncodeErrorReply(absl::InvalidArgumentError(
                  "a second hello on one store connection")),
              true, -1};
    case Op::kGet:
    case Op::kWait:
    case Op::kMultiGet:
      return Immediate(*request);
    case Op::kBarrier:
      if (IsParked(client)) return SecondPark();
      return HandleBarrier(client, payload, *request);
    default:
      return HandleOp(client, *request);
  }
}

StoreService::Outcome StoreService::Immediate(const Request& r) const {
  for (absl::string_view k : r.keys) {
    if (!Present(r.op, k)) {
      return {EncodeErrorReply(absl::DeadlineExceededError(
                  absl::StrCat("store key '", absl::CHexEscape(k),
                               "' was not set within 0 ms"))),
              false, -1};
    }
  }
  return {CompleteReply(r), false, -1};
}

bool StoreService::Present(Op op, absl::string_view key) const {
  if (table_.Contains(key)) return true;
  if (op != Op::kWait && op != Op::kCheck) return false;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

StoreService::Outcome StoreService::HandleHello(ClientId client,
                                                const Request& request) {
  if (request.op != Op::kHello) {
    return {EncodeErrorReply(absl::FailedPreconditionError(
                "the first request on a store connection must be a hello")),
            true, -1};
  }
  if (request.number != kWireVersion) {
    return {EncodeErrorReply(absl::FailedPreconditionError(absl::StrCat(
                "client speaks store protocol version ", request.number,
                "; this server speaks ", kWireVersion))),
            true, -1};
  }
  if (!SameToken(request.values[0], token_)) {
    return {EncodeErrorReply(absl::PermissionDeniedError(
                request.values[0].empty()
                    ? "the store requires a token and the client sent none"
                    : "the client's store token is wrong")),
            true, -1};
  }
  greeted_[client] = true;
  return {OkReply(), false, -1};
}

StoreService::Outcome StoreService::HandleOp(ClientId client,
                                             const Request& r) {
  (void)client;
  WireWriter ok;
  ok.U8(0);
  switch (r.op) {
    case Op::kSet:
      KeyWritten(r.keys[0], table_.Set(r.keys[0], r.values[0]));
      break;
    case Op::kAdd: {
      const bool existed = table_.Contains(r.keys[0]);
      absl::StatusOr<int64_t> sum = table_.Add(r.keys[0], r.number);
      if (!sum.ok()) return {EncodeErrorReply(sum.status()), false, -1};
      KeyWritten(r.keys[0], !existed);
      ok.I64(*sum);
      break;
    }
    case Op::kCompareSet: {
      bool created = false;
      std::string now =
          table_.CompareSet(r.keys[0], r.values[0], r.values[1], &created);
      KeyWritten(r.keys[0], created);  // torch's server wakes on a mismatch too
      ok.Bytes(now);
      break;
    }
    case Op::kAppend: {
      absl::StatusOr<bool> created = table_.Append(r.keys[0], r.values[0]);
      if (!created.ok()) return {EncodeErrorReply(created.status()), false, -1};
      KeyWritten(r.keys[0], *created);
      break;
    }
    case Op::kQueuePush:
      queues_[std::string(r.keys[0])].emplace_back(r.values[0]);
      WakeOneQueueWaiter(r.keys[0]);
      break;
    case Op::kQueuePop: {
      auto q = queues_.find(r.keys[0]);
      const size_t length = q == queues_.end() ? 0 : q->second.size();
      ok.I64(static_cast<int64_t>(length));
      if (length > 0) {
        ok.Bytes(q->second.front());
        q->second.pop_front();
        if (q->second.empty()) queues_.erase(q);
      }
      break;
    }
    case Op::kQueueLen: {
      auto q = queues_.find(r.keys[0]);
      ok.I64(q == queues_.end() ? 0 : static_cast<int64_t>(q->second.size()));
      break;
    }
    case Op::kListKeys: {
      const std::vector<absl::string_view> keys = table_.Keys();
      size_t bytes = 1 + 4;
      for (absl::string_view k : keys) bytes += 4 + k.size();
      if (bytes > kMaxFrameBytes) {
        return {EncodeErrorReply(absl::OutOfRangeError(absl::StrCat(
                    "the ", keys.size(), " keys take ", bytes,
                    " bytes, over the reply limit of ", kMaxFrameBytes))),
                false, -1};
      }
      WireWriter list(4 + bytes);
      list.U8(0).U32(static_cast<uint32_t>(keys.size()));
      for (absl::string_view k : keys) list.Bytes(k);
      return {std::move(list).Finish(), false, -1};
    }
    case Op::kCheck: {
      bool all = true;
      for (absl::string_view k : r.keys) all = all && Present(Op::kCheck, k);
      ok.U8(all ? 1 : 0);
      break;
    }
    case Op::kDeleteKey:
      ok.U8(table_.Delete(r.keys[0]) ? 1 : 0);
      break;
    case Op::kDeletePrefix:
      ok.I64(table_.DeletePrefix(r.keys[0]));
      break;
    case Op::kMultiGetOrEmpty: {
      size_t bytes = 1 + 4;
      for (absl::string_view k : r.keys) {
        const std::string* v = table_.Find(k);
        bytes += 4 + (v == nullptr ? 0 : v->size());
      }
      if (bytes > kMaxFrameBytes) {
        return {EncodeErrorReply(absl::OutOfRangeError(absl::StrCat(
                    "the values of the ", r.keys.size(), " keys take ", bytes,
                    " bytes, over the reply limit of ", kMaxFrameBytes))),
                false, -1};
      }
      WireWriter values(4 + bytes);
      values.U8(0).U32(static_cast<uint32_t>(r.keys.size()));
      for (absl::string_view k : r.keys) {
        const std::string* v = table_.Find(k);
        values.Bytes(v == nullptr ? absl::string_view() : *v);
      }
      return {std::move(values).Finish(), false, -1};
    }
    case Op::kNumKeys:
      ok.I64(table_.size());
      break;
    case Op::kMultiSet:
      for (size_t i = 0; i < r.keys.size(); ++i) {
        KeyWritten(r.keys[i], table_.Set(r.keys[i], r.values[i]));
      }
      break;
    default:
      return {EncodeErrorReply(absl::InvalidArgumentError(absl::StrCat(
                  "op ", static_cast<int>(r.op), " is not a store op"))),
              true, -1};
  }
  return {std::move(ok).Finish(), false, -1};
}

absl::StatusOr<std::shared_ptr<const StoreService::SharedRequest>>
StoreService::Share(absl::string_view payload) {
  auto found = shared_requests_.find(payload);
  if (found != shared_requests_.end()) return found->second;
  auto shared = std::make_shared<SharedRequest>();
  shared->payload.assign(payload.data(), payload.size());
  // Views point into the shared copy, which lives as long as its users.
  DEVMESH_ASSIGN_OR_RETURN(shared->request, DecodeRequest(shared->payload));
  shared_requests_.emplace(shared->payload, shared);
  return shared;
}

StoreService::Outcome StoreService::HandleBarrier(ClientId client,
                                                  absl::string_view payload,
                                                  const Request& r) {
  const absl::string_view key = r.keys[0];
  const bool existed = table_.Contains(key);
  absl::StatusOr<int64_t> count = table_.Add(key, 1);
  if (!count.ok()) return {EncodeErrorReply(count.status()), false, -1};
  if (!existed) KeyAdded(key);
  if (*count >= r.number) {
    ReleaseBarriers(key);
    return {OkReply(), false, -1};
  }
  absl::StatusOr<std::shared_ptr<const SharedRequest>> shared = Share(payload);
  if (!shared.ok()) return {EncodeErrorReply(shared.status()), true, -1};
  auto parked = std::make_unique<Parked>();
  parked->shared = *std::move(shared);
  barrier_waiters_[std::string(key)].push_back(client);
  parked_[client] = std::move(parked);
  return {std::nullopt, false, -1};  // no timer: the client cancels
}

StoreService::Outcome StoreService::Park(ClientId client,
                                         absl::string_view payload) {
  auto parked = std::make_unique<Parked>();
  absl::StatusOr<std::shared_ptr<const SharedRequest>> shared = Share(payload);
  if (!shared.ok()) return {EncodeErrorReply(shared.status()), true, -1};
  parked->shared = *std::move(shared);
  if (Advance(client, *parked)) {
    std::string reply = CompleteReply(parked->request());
    parked_[client] = std::move(parked);
    Unpark(client);
    return {std::move(reply), false, -1};
  }
  const int64_t timeout_ms = parked->request().number;
  parked_[client] = std::move(parked);
  if (timeout_ms == 0) return {Expire(client), false, -1};
  return {std::nullopt, false, timeout_ms};
}

bool StoreService::Advance(ClientId client, Parked& parked) {
  const std::vector<absl::string_view>& keys = parked.request().keys;
  size_t& scanned = parked.shared->scanned;
  while (true) {
    parked.cursor = std::max(parked.cursor, scanned);
    while (parked.cursor < keys.size() &&
           Present(parked.request().op, keys[parked.cursor])) {
      ++parked.cursor;
    }
    scanned = std::max(scanned, parked.cursor);
    if (parked.cursor < keys.size()) {
      waiters_[keys[parked.cursor]].push_back(client);
      return false;
    }
    // Wait only needs every key to have been set; Get and MultiGet return
    // values, so a key deleted since it was seen sends them back to waiting.
    if (parked.request().op == Op::kWait) return true;
    size_t missing = 0;
    while (missing < keys.size() && table_.Contains(keys[missing])) ++missing;
    if (missing == keys.size()) return true;
    parked.cursor = missing;
    scanned = missing;
  }
}

std::string StoreService::CompleteReply(const Request& r) const {
  WireWriter w;
  w.U8(0);
  if (r.op == Op::kGet) w.Bytes(*table_.Find(r.keys[0]));
  if (r.op == Op::kMultiGet) {
    w.U32(static_cast<uint32_t>(r.keys.size()));
    for (absl::string_view k : r.keys) w.Bytes(*table_.Find(k));
  }
  return std::move(w).Finish();
}

void StoreService::KeyWritten(absl::string_view key, bool created) {
  if (created) KeyAdded(key);
  ReleaseBarriers(key);
}

void StoreService::ReleaseBarriers(absl::string_view key) {
  auto it = barrier_waiters_.find(key);
  if (it == barrier_waiters_.end()) return;
  std::vector<ClientId> clients = std::move(it->second);
  barrier_waiters_.erase(it);
  for (ClientId client : clients) {
    auto p = parked_.find(client);
    if (p == parked_.end() || p->second->request().op != Op::kBarrier ||
        p->second->request().keys[0] != key) {
      continue;
    }
    completed_.emplace_back(client, OkReply());
    Unpark(client);
  }
}

void StoreService::WakeOneQueueWaiter(absl::string_view key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  // Moved out: Advance may add to waiters_ (and rehash it).
  std::vector<ClientId> clients = std::move(it->second);
  waiters_.erase(it);
  std::vector<ClientId> keep;
  size_t i = 0;
  for (bool woke = false; i < clients.size() && !woke; ++i) {
    const ClientId client = clients[i];
    auto p = parked_.find(client);
    if (p == parked_.end()) continue;  // stale: dropped
    Parked& parked = *p->second;
    if (parked.request().op == Op::kBarrier ||
        parked.cursor >= parked.request().keys.size() ||
        parked.request().keys[parked.cursor] != key) {
      continue;  // stale: now parked on something else
    }
    if (parked.request().op != Op::kWait) {  // Get, MultiGet: need the table
      keep.push_back(client);
      continue;
    }
    if (Advance(client, parked)) {  // else: now registered on another key
      completed_.emplace_back(client, CompleteReply(parked.request()));
      Unpark(client);
      woke = true;
    }
  }
  keep.insert(keep.end(), clients.begin() + i, clients.end());
  if (keep.empty()) return;
  std::vector<ClientId>& now = waiters_[std::string(key)];
  keep.insert(keep.end(), now.begin(), now.end());
  now = std::move(keep);
}

void StoreService::KeyAdded(absl::string_view key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<ClientId> clients = std::move(it->second);
  waiters_.erase(it);
  for (ClientId client : clients) {
    auto p = parked_.find(client);
    if (p == parked_.end()) continue;
    Parked& parked = *p->second;
    // Skip stale registrations of a client now waiting on another key.
    if (parked.request().op == Op::kBarrier ||
        parked.cursor >= parked.request().keys.size() ||
        parked.request().keys[parked.cursor] != key) {
      continue;
    }
    if (Advance(client, parked)) {
      completed_.emplace_back(client, CompleteReply(parked.request()));
      Unpark(client);
    }
  }
}

std::string StoreService::Expire(ClientId client) {
  auto p = parked_.find(client);
  if (p == parked_.end()) return "";
  const Parked& parked = *p->second;
  if (parked.request().op == Op::kBarrier) {
    absl::string_view key = parked.request().keys[0];
    std::string reply = EncodeErrorReply(absl::DeadlineExceededError(
        absl::StrCat("store barrier '", absl::CHexEscape(key),
                     "' was cancelled before ", parked.request().number,
                     " calls reached it")));
    auto w = barrier_waiters_.find(key);
    if (w != barrier_waiters_.end()) {
      std::vector<ClientId>& list = w->second;
      list.erase(std::remove(list.begin(), list.end(), client), list.end());
      if (list.empty()) barrier_waiters_.erase(w);
    }
    Unpark(client);
    return reply;
  }
  absl::string_view missing = parked.request().keys[parked.cursor];
  std::string reply = EncodeErrorReply(absl::DeadlineExceededError(
      absl::StrCat("store key '", absl::CHexEscape(missing),
                   "' was not set within ", parked.request().number, " ms")));
  auto w = waiters_.find(missing);
  if (w != waiters_.end()) {
    std::vector<ClientId>& list = w->second;
    list.erase(std::remove(list.begin(), list.end(), client), list.end());
    if (list.empty()) waiters_.erase(w);
  }
  Unpark(client);
  return reply;
}

void StoreService::Unpark(ClientId client) {
  auto p = parked_.find(client);
  if (p == parked_.end()) return;
  std::shared_ptr<const SharedRequest> shared = std::move(p->second->shared);
  parked_.erase(p);
  // Only the map and `shared` left: nobody else waits on this request.
  if (shared.use_count() == 2) shared_requests_.erase(shared->payload);
}

void StoreService::Forget(ClientId client) {
  Expire(client);
  greeted_.erase(client);
}

std::vector<std::pair<StoreService::ClientId, std::string>>
StoreService::TakeCompleted() {
  return std::exchange(completed_, {});
}

}  // namespace devmesh
