#include "store/c10d_store_client.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"
#include "store/store_limits.h"
#include "store/wire_format.h"

namespace devmesh {
namespace {

std::string Slashed(absl::string_view key) {
  return absl::StrCat(kC10dKeyPrefix, key);
}

std::vector<std::string> SlashedAll(absl::Span<const std::string> keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) out.push_back(Slashed(k));
  return out;
}

std::vector<absl::string_view> Views(const std::vector<std::string>& v) {
  return std::vector<absl::string_view>(v.begin(), v.end());
}

absl::Status Closed(absl::Status st) {
  if (st.code() != absl::StatusCode::kUnavailable) return st;
  return absl::UnavailableError(absl::StrCat(
      "the c10d server closed the connection (it does so on input it "
      "refuses, e.g. a value over its size limit): ",
      st.message()));
}

absl::StatusOr<uint8_t> ReadU8(Socket& s, absl::Time deadline) {
  char b = 0;
  if (absl::Status st = s.RecvAll(&b, 1, deadline); !st.ok()) return Closed(st);
  return static_cast<uint8_t>(b);
}

absl::StatusOr<int64_t> ReadI64(Socket& s, absl::Time deadline) {
  char b[8];
  if (absl::Status st = s.RecvAll(b, 8, deadline); !st.ok()) return Closed(st);
  return static_cast<int64_t>(absl::little_endian::Load64(b));
}

absl::StatusOr<std::string> ReadStr(Socket& s, absl::Time deadline) {
  DEVMESH_ASSIGN_OR_RETURN(int64_t len, ReadI64(s, deadline));
  if (len < 0 || len > int64_t{kMaxFrameBytes}) {
    return absl::InternalError(
        absl::StrCat("c10d server sent a string of ", len, " bytes"));
  }
  std::string v(static_cast<size_t>(len), '\0');
  if (absl::Status st = s.RecvAll(v.data(), v.size(), deadline); !st.ok()) {
    return Closed(st);
  }
  return v;
}

absl::Status Send(Socket& s, const C10dRequest& r, absl::Time deadline) {
  return Closed(s.SendAll(EncodeC10dRequest(r), deadline));
}

// Sends `r`, which has no reply, followed by a PING, and reads the echo: the
// call returns only once the server has handled `r`, so calls from one thread
// reach the server in program order even when they use different pooled
// connections, and a server that refused `r` (closed) is noticed at once.
absl::Status SendSynced(Socket& s, const C10dRequest& r, absl::Time deadline) {
  const uint32_t nonce = static_cast<uint32_t>(getpid());
  std::string bytes = EncodeC10dRequest(r);
  bytes += EncodeC10dRequest({C10dQuery::kPing, {}, {}, nonce});
  DEVMESH_RETURN_IF_ERROR(Closed(s.SendAll(bytes, deadline)));
  char echo[4];
  DEVMESH_RETURN_IF_ERROR(Closed(s.RecvAll(echo, 4, deadline)));
  if (absl::little_endian::Load32(echo) != nonce) {
    return absl::InternalError("c10d PING after a write echoed another nonce");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<C10dStoreClient>> C10dStoreClient::Connect(
    const C10dStoreClientOptions& options) {
  std::unique_ptr<C10dStoreClient> client(new C10dStoreClient(options));
  DEVMESH_ASSIGN_OR_RETURN(Socket first, client->Open(/*first=*/true));
  client->Return(std::move(first));
  return client;
}

absl::StatusOr<Socket> C10dStoreClient::Open(bool first) const {
  const absl::Duration refused_for = first ? absl::InfiniteDuration()
                                     : server_stopped_.load()
                                         ? absl::ZeroDuration()
                                         : options_.reconnect_refused_timeout;
  absl::StatusOr<Socket> connected =
      Socket::Connect(options_.host, options_.port,
                      absl::Now() + options_.connect_timeout, refused_for);
  if (!connected.ok()) {
    if (!first && Socket::IsRefusal(connected.status())) {
      server_stopped_.store(true);
    }
    return connected.status();
  }
  if (!first) server_stopped_.store(false);
  Socket s = *std::move(connected);
  const absl::Time deadline = absl::Now() + options_.default_timeout;
  const uint32_t nonce = static_cast<uint32_t>(getpid());
  std::string hello = EncodeC10dRequest(
      {C10dQuery::kValidate, {}, {}, static_cast<int64_t>(kC10dMagic)});
  hello += EncodeC10dRequest({C10dQuery::kPing, {}, {}, nonce});
  DEVMESH_RETURN_IF_ERROR(s.SendAll(hello, deadline));
  char echo[4];
  if (absl::Status st = s.RecvAll(echo, 4, deadline); !st.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "c10d handshake with ", options_.host, ":", options_.port,
        " failed (", st.message(),
        "); is it a c10d TCPStore, and if it is a devmesh server with a "
        "token, does it allow c10d clients?"));
  }
  if (absl::little_endian::Load32(echo) != nonce) {
    return absl::UnavailableError(absl::StrCat(
        "c10d handshake with ", options_.host, ":", options_.port,
        ": the PING nonce did not come back; not a c10d TCPStore"));
  }
  return s;
}

absl::StatusOr<Socket> C10dStoreClient::Borrow() {
  {
    sync_internal::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      Socket s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  return Open(/*first=*/false);
}

void C10dStoreClient::Return(Socket s) {
  sync_internal::MutexLock lock(&mu_);
  idle_.push_back(std::move(s));
}

absl::Status C10dStoreClient::WaitOn(Socket& s,
                                     absl::Span<const std::string> keys,
                                     absl::Duration timeout) {
  const std::vector<std::string> slashed = SlashedAll(keys);
  const absl::Time start = absl::Now();
  DEVMESH_RETURN_IF_ERROR(Send(s, {C10dQuery::kWait, Views(slashed), {}, 0},
                               start + options_.default_timeout));
  absl::StatusOr<uint8_t> r =
      ReadU8(s, start + std::max(timeout, absl::ZeroDuration()));
  if (r.ok()) {
    if (*r != kC10dStopWaiting) {
      return absl::InternalError(
          absl::StrCat("c10d WAIT answered ", static_cast<int>(*r)));
    }
    return absl::OkStatus();
  }
  if (r.status().code() != absl::StatusCode::kDeadlineExceeded) {
    return r.status();
  }
  // PyTorch's client's timeout path: CANCEL_WAIT, then WAIT_CANCELED, after
  // a STOP_WAITING when the keys arrived meanwhile.
  const absl::Time deadline = absl::Now() + options_.default_timeout;
  DEVMESH_RETURN_IF_ERROR(
      Send(s, {C10dQuery::kCancelWait, {}, {}, 0}, deadline));
  absl::StatusOr<uint8_t> c = ReadU8(s, deadline);
  if (c.ok() && *c == kC10dStopWaiting) c = ReadU8(s, deadline);
  if (!c.ok()) return c.status();
  if (*c != kC10dWaitCanceled) {
    return absl::InternalError(
        absl::StrCat("c10d CANCEL_WAIT answered ", static_cast<int>(*c)));
  }
  // Name the first missing key, as devmesh's own server does.
  std::string missing = keys.empty() ? "" : keys[0];
  for (size_t i = 0; i < slashed.size(); ++i) {
    if (Send(s, {C10dQuery::kCheck, {slashed[i]}, {}, 0}, deadline).ok()) {
      DEVMESH_ASSIGN_OR_RETURN(uint8_t ready, ReadU8(s, deadline));
      if (ready != kC10dReady) {
        missing = keys[i];
        break;
      }
    }
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "store key '", absl::CHexEscape(missing), "' was not set within ",
      absl::ToInt64Milliseconds(timeout), " ms"));
}

// Runs `body` on a borrowed connection; the connection goes back to the pool
// only when `body` succeeded or failed with DeadlineExceeded after a clean
// CANCEL_WAIT (WaitOn), never after a broken exchange.
#define DEVMESH_C10D_BORROW(s)                  \
  DEVMESH_ASSIGN_OR_RETURN(Socket s, Borrow()); \
  const absl::Time deadline = absl::Now() + options_.default_timeout

absl::Status C10dStoreClient::Set(absl::string_view key,
                                  absl::string_view value) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(value));
  DEVMESH_C10D_BORROW(s);
  const std::string k = Slashed(key);
  DEVMESH_RETURN_IF_ERROR(
      SendSynced(s, {C10dQuery::kSet, {k}, {value}, 0}, deadline));
  Return(std::move(s));
  return absl::OkStatus();
}

absl::Status C10dStoreClient::Append(absl::string_view key,
                                     absl::string_view value) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(value));
  DEVMESH_C10D_BORROW(s);
  const std::string k = Slashed(key);
  if (absl::Status st =
          SendSynced(s, {C10dQuery::kAppend, {k}, {value}, 0}, deadline);
      !st.ok()) {
    return st;
  }
  Return(std::move(s));
  return absl::OkStatus();
}

absl::StatusOr<std::string> C10dStoreClient::Get(absl::string_view key,
                                                 absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_C10D_BORROW(s);
  const std::string user_key(key);
  absl::Status waited = WaitOn(s, absl::MakeConstSpan(&user_key, 1), timeout);
  if (!waited.ok()) {
    if (waited.code() == absl::StatusCode::kDeadlineExceeded) {
      Return(std::move(s));
    }
    return waited;
  }
  const std::string k = Slashed(key);
  const absl::Time after = absl::Now() + options_.default_timeout;
  DEVMESH_RETURN_IF_ERROR(Send(s, {C10dQuery::kGet, {k}, {}, 0}, after));
  DEVMESH_ASSIGN_OR_RETURN(std::string value, ReadStr(s, after));
  Return(std::move(s));
  (void)deadline;
  return value;
}

absl::StatusOr<int64_t> C10dStoreClient::Add(absl::string_view key,
                                             int64_t delta) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  absl::StatusOr<int64_t> sum;
  {
    DEVMESH_C10D_BORROW(s);
    const std::string k = Slashed(key);
    absl::Status st = Send(s, {C10dQuery::kAdd, {k}, {}, delta}, deadline);
    sum = st.ok() ? ReadI64(s, deadline) : absl::StatusOr<int64_t>(st);
    if (sum.ok()) {
      Return(std::move(s));
      return sum;
    }
  }
  if (sum.status().code() != absl::StatusCode::kUnavailable) return sum;
  // The server may have dropped us because the key holds no number.
  const std::string user_key(key);
  absl::StatusOr<bool> present = Check(absl::MakeConstSpan(&user_key, 1));
  if (!present.ok() || !*present) return sum;
  absl::StatusOr<std::string> old = Get(key, options_.default_timeout);
  int64_t n = 0;
  if (old.ok() && !absl::SimpleAtoi(*old, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store key '", absl::CHexEscape(key), "' holds '",
        absl::CHexEscape(old->substr(0, 64)),
        "', not a decimal int64, so Add cannot count on it"));
  }
  return sum;
}

absl::StatusOr<std::string> C10dStoreClient::CompareSet(
    absl::string_view key, absl::string_view expected,
    absl::string_view desired) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(expected));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(desired));
  DEVMESH_C10D_BORROW(s);
  const std::string k = Slashed(key);
  DEVMESH_RETURN_IF_ERROR(
      Send(s, {C10dQuery::kCompareSet, {k}, {expected, desired}, 0}, deadline));
  DEVMESH_ASSIGN_OR_RETURN(std::string now, ReadStr(s, deadline));
  Return(std::move(s));
  return now;
}

absl::Status C10dStoreClient::Wait(absl::Span<const std::string> keys,
                                   absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  DEVMESH_C10D_BORROW(s);
  (void)deadline;
  absl::Status st = WaitOn(s, keys, timeout);
  if (st.ok() || st.code() == absl::StatusCode::kDeadlineExceeded) {
    Return(std::move(s));
  }
  return st;
}

absl::StatusOr<bool> C10dStoreClient::Check(
    absl::Span<const std::string> keys) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  DEVMESH_C10D_BORROW(s);
  const std::vector<std::string> slashed = SlashedAll(keys);
  if (absl::Status st =
          Send(s, {C10dQuery::kCheck, Views(slashed), {}, 0}, deadline);
      !st.ok()) {
    return st;
  }
  DEVMESH_ASSIGN_OR_RETURN(uint8_t r, ReadU8(s, deadline));
  Return(std::move(s));
  return r == kC10dReady;
}

absl::StatusOr<bool> C10dStoreClient::DeleteKey(absl::string_view key) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_C10D_BORROW(s);
  const std::string k = Slashed(key);
  DEVMESH_RETURN_IF_ERROR(
      Send(s, {C10dQuery::kDeleteKey, {k}, {}, 0}, deadline));
  DEVMESH_ASSIGN_OR_RETURN(int64_t n, ReadI64(s, deadline));
  Return(std::move(s));
  return n > 0;
}

absl::StatusOr<int64_t> C10dStoreClient::DeletePrefix(
    absl::string_view prefix) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(prefix));
  // c10d has no prefix delete: LIST_KEYS, then a DELETE_KEY of each listed
  // key under the prefix (listed keys carry the "/" of Slashed).
  DEVMESH_C10D_BORROW(s);
  DEVMESH_RETURN_IF_ERROR(Send(s, {C10dQuery::kListKeys, {}, {}, 0}, deadline));
  DEVMESH_ASSIGN_OR_RETURN(int64_t n, ReadI64(s, deadline));
  const std::string slashed = Slashed(prefix);
  std::vector<std::string> doomed;
  for (int64_t i = 0; i < n; ++i) {
    DEVMESH_ASSIGN_OR_RETURN(std::string key, ReadStr(s, deadline));
    if (absl::StartsWith(key, slashed)) doomed.push_back(std::move(key));
  }
  int64_t deleted = 0;
  for (const std::string& key : doomed) {
    DEVMESH_RETURN_IF_ERROR(
        Send(s, {C10dQuery::kDeleteKey, {key}, {}, 0}, deadline));
    DEVMESH_ASSIGN_OR_RETURN(int64_t gone, ReadI64(s, deadline));
    deleted += gone > 0 ? 1 : 0;
  }
  Return(std::move(s));
  return deleted;
}

absl::StatusOr<int64_t> C10dStoreClient::NumKeys() {
  DEVMESH_C10D_BORROW(s);
  DEVMESH_RETURN_IF_ERROR(
      Send(s, {C10dQuery::kGetNumKeys, {}, {}, 0}, deadline));
  DEVMESH_ASSIGN_OR_RETURN(int64_t n, ReadI64(s, deadline));
  Return(std::move(s));
  return n;
}

absl::StatusOr<std::vector<std::string>> C10dStoreClient::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  DEVMESH_C10D_BORROW(s);
  (void)deadline;
  absl::Status waited = WaitOn(s, keys, timeout);
  if (!waited.ok()) {
    if (waited.code() == absl::StatusCode::kDeadlineExceeded) {
      Return(std::move(s));
    }
    return waited;
  }
  const std::vector<std::string> slashed = SlashedAll(keys);
  const absl::Time after = absl::Now() + options_.default_timeout;
  if (absl::Status st =
          Send(s, {C10dQuery::kMultiGet, Views(slashed), {}, 0}, after);
      !st.ok()) {
    return st;
  }
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    DEVMESH_ASSIGN_OR_RETURN(std::string v, ReadStr(s, after));
    values.push_back(std::move(v));
  }
  Return(std::move(s));
  return values;
}

absl::Status C10dStoreClient::MultiSet(absl::Span<const std::string> keys,
                                       absl::Span<const std::string> values) {
  DEVMESH_RETURN_IF_ERROR(ValidateMultiSet(keys, values));
  DEVMESH_C10D_BORROW(s);
  const std::vector<std::string> slashed = SlashedAll(keys);
  C10dRequest r{C10dQuery::kMultiSet, Views(slashed), {}, 0};
  r.values.assign(values.begin(), values.end());
  DEVMESH_RETURN_IF_ERROR(SendSynced(s, r, deadline));
  Return(std::move(s));
  return absl::OkStatus();
}

#undef DEVMESH_C10D_BORROW

}  // namespace devmesh
