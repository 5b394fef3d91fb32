#include "store/store_service.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

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

}  // namespace

StoreService::Outcome StoreService::Handle(ClientId client,
                                           absl::string_view payload) {
  const Op op = payload.empty() ? Op::kHello : static_cast<Op>(payload[0]);
  if ((op == Op::kGet || op == Op::kWait || op == Op::kMultiGet) &&
      greeted_.contains(client)) {
    return Park(client, payload);  // decodes its own copy, once
  }
  absl::StatusOr<Request> request = DecodeRequest(payload);
  if (!request.ok()) {
    return {EncodeErrorReply(request.status()), true, -1};
  }
  if (!greeted_.contains(client)) return HandleHello(client, *request);
  if (request->op == Op::kHello) {
    return {EncodeErrorReply(absl::InvalidArgumentError(
                "a second hello on one store connection")),
            true, -1};
  }
  return HandleOp(client, *request);
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
      if (table_.Set(r.keys[0], r.values[0])) KeyAdded(r.keys[0]);
      break;
    case Op::kAdd: {
      const bool existed = table_.Contains(r.keys[0]);
      absl::StatusOr<int64_t> sum = table_.Add(r.keys[0], r.number);
      if (!sum.ok()) return {EncodeErrorReply(sum.status()), false, -1};
      if (!existed) KeyAdded(r.keys[0]);
      ok.I64(*sum);
      break;
    }
    case Op::kCompareSet: {
      bool created = false;
      std::string now =
          table_.CompareSet(r.keys[0], r.values[0], r.values[1], &created);
      if (created) KeyAdded(r.keys[0]);
      ok.Bytes(now);
      break;
    }
    case Op::kAppend: {
      absl::StatusOr<bool> created = table_.Append(r.keys[0], r.values[0]);
      if (!created.ok()) return {EncodeErrorReply(created.status()), false, -1};
      if (*created) KeyAdded(r.keys[0]);
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
      for (absl::string_view k : r.keys) all = all && table_.Contains(k);
      ok.U8(all ? 1 : 0);
      break;
    }
    case Op::kDeleteKey:
      ok.U8(table_.Delete(r.keys[0]) ? 1 : 0);
      break;
    case Op::kNumKeys:
      ok.I64(table_.size());
      break;
    case Op::kMultiSet:
      for (size_t i = 0; i < r.keys.size(); ++i) {
        if (table_.Set(r.keys[i], r.values[i])) KeyAdded(r.keys[i]);
      }
      break;
    default:
      return {EncodeErrorReply(absl::InvalidArgumentError(absl::StrCat(
                  "op ", static_cast<int>(r.op), " is not a store op"))),
              true, -1};
  }
  return {std::move(ok).Finish(), false, -1};
}

StoreService::Outcome StoreService::Park(ClientId client,
                                         absl::string_view payload) {
  auto parked = std::make_unique<Parked>();
  auto found = shared_requests_.find(payload);
  if (found != shared_requests_.end()) {
    parked->shared = found->second;
  } else {
    auto shared = std::make_shared<SharedRequest>();
    shared->payload.assign(payload.data(), payload.size());
    // Views point into the shared copy, which lives as long as its users.
    absl::StatusOr<Request> request = DecodeRequest(shared->payload);
    if (!request.ok()) return {EncodeErrorReply(request.status()), true, -1};
    shared->request = *std::move(request);
    parked->shared = shared;
    shared_requests_.emplace(shared->payload, std::move(shared));
  }
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
           table_.Contains(keys[parked.cursor])) {
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
    if (parked.cursor >= parked.request().keys.size() ||
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
