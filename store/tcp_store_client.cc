#include "store/tcp_store_client.h"

#include <algorithm>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"
#include "store/store_limits.h"

namespace devmesh {
namespace {

// Extra time the client waits beyond a server-side wait before it gives up on
// a server that has gone quiet.
constexpr absl::Duration kWaitSlack = absl::Seconds(5);

absl::StatusOr<std::string> ReadFrame(Socket& s, absl::Time deadline) {
  char header[4];
  DEVMESH_RETURN_IF_ERROR(s.RecvAll(header, 4, deadline));
  const uint32_t len = absl::little_endian::Load32(header);
  if (len > kMaxFrameBytes) {
    return absl::InternalError(
        absl::StrCat("store server sent a frame of ", len, " bytes"));
  }
  std::string payload(len, '\0');
  DEVMESH_RETURN_IF_ERROR(s.RecvAll(payload.data(), len, deadline));
  return payload;
}

// Splits a reply into its status and, on OK, the result bytes.
absl::StatusOr<std::string> ParseReply(std::string payload) {
  WireReader in(payload);
  uint8_t code = 0;
  if (!in.U8(&code)) return absl::InternalError("empty store reply");
  if (code == 0) return payload.substr(1);
  absl::string_view message;
  if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated) ||
      !in.Bytes(&message)) {
    return absl::InternalError("malformed store error reply");
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

int64_t TimeoutMs(absl::Duration timeout) {
  return std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout));
}

std::vector<absl::string_view> Views(absl::Span<const std::string> keys) {
  return std::vector<absl::string_view>(keys.begin(), keys.end());
}

absl::Status Malformed() {
  return absl::InternalError("store reply is shorter than its op's result");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const TcpStoreClientOptions& options) {
  std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(options));
  DEVMESH_ASSIGN_OR_RETURN(Socket first,
                           client->Open(/*first=*/true, absl::InfinitePast()));
  {
    // Not shared yet; held for the analysis.
    sync_internal::MutexLock lock(&client->mu_);
    client->idle_.push_back(std::move(first));
  }
  return client;
}

absl::StatusOr<Socket> TcpStoreClient::Open(bool first,
                                            absl::Time call_deadline) const {
  const absl::Duration refused_for = first ? absl::InfiniteDuration()
                                     : server_stopped_.load()
                                         ? absl::ZeroDuration()
                                         : options_.reconnect_refused_timeout;
  absl::StatusOr<Socket> s =
      Socket::Connect(options_.host, options_.port,
                      absl::Now() + options_.connect_timeout, refused_for);
  if (!s.ok()) {
    if (!first && Socket::IsRefusal(s.status())) server_stopped_.store(true);
    return s.status();
  }
  if (!first) server_stopped_.store(false);
  Request hello;
  hello.op = Op::kHello;
  hello.number = kWireVersion;
  hello.values.push_back(options_.token);
  const absl::Time deadline =
      first ? absl::Now() + std::min(options_.default_timeout,
                                     options_.handshake_timeout)
            : std::max(absl::Now() + options_.handshake_timeout,
                       call_deadline);
  auto not_a_store = [&](const absl::Status& why) {
    if (!first) {
      return absl::UnavailableError(absl::StrCat(
          "the store at ", options_.host, ":", options_.port,
          " did not answer a new connection's handshake (", why.message(),
          ")"));
    }
    return absl::UnavailableError(absl::StrCat(
        "the peer at ", options_.host, ":", options_.port,
        " accepted the connection but did not answer devmesh's store "
        "handshake (", why.message(),
        "): is MASTER_PORT (or DEVMESH_STORE_ADDR) held by a program that is "
        "not a devmesh store?"));
  };
  if (absl::Status st = s->SendAll(EncodeRequest(hello), deadline); !st.ok()) {
    return not_a_store(st);
  }
  absl::StatusOr<std::string> reply = ReadFrame(*s, deadline);
  if (!reply.ok()) return not_a_store(reply.status());
  absl::StatusOr<std::string> result = ParseReply(std::move(*reply));
  if (!result.ok()) {
    if (absl::IsInternal(result.status())) return not_a_store(result.status());
    return result.status();
  }
  return s;
}

absl::StatusOr<std::string> TcpStoreClient::Call(const Request& request,
                                                 absl::Duration wait) {
  std::string frame = EncodeRequest(request);
  if (frame.size() - 4 > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store request of ", frame.size() - 4,
                     " bytes is over the frame limit of ", kMaxFrameBytes));
  }
  Socket s;
  {
    sync_internal::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      s = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  // The call's bound, from now: its wait (+ slack), else default_timeout.
  auto call_deadline = [&] {
    return absl::Now() + (wait > absl::ZeroDuration()
                              ? wait + kWaitSlack
                              : options_.default_timeout);
  };
  if (!s.valid()) {
    DEVMESH_ASSIGN_OR_RETURN(s, Open(/*first=*/false, call_deadline()));
  }
  const absl::Time deadline = call_deadline();
  DEVMESH_RETURN_IF_ERROR(s.SendAll(frame, deadline));
  DEVMESH_ASSIGN_OR_RETURN(
      std::string reply, ReadFrame(s, deadline));  // the connection is dropped
  {
    sync_internal::MutexLock lock(&mu_);
    idle_.push_back(std::move(s));
  }
  return ParseReply(std::move(reply));
}

absl::Status TcpStoreClient::Set(absl::string_view key,
                                 absl::string_view value) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(value));
  return Call({Op::kSet, {key}, {value}, 0}, absl::ZeroDuration()).status();
}

absl::StatusOr<std::string> TcpStoreClient::Get(absl::string_view key,
                                                absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_ASSIGN_OR_RETURN(
      std::string r, Call({Op::kGet, {key}, {}, TimeoutMs(timeout)}, timeout));
  WireReader in(r);
  absl::string_view value;
  if (!in.Bytes(&value)) return Malformed();
  return std::string(value);
}

absl::StatusOr<int64_t> TcpStoreClient::Add(absl::string_view key,
                                            int64_t delta) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_ASSIGN_OR_RETURN(
      std::string r, Call({Op::kAdd, {key}, {}, delta}, absl::ZeroDuration()));
  WireReader in(r);
  int64_t sum = 0;
  if (!in.I64(&sum)) return Malformed();
  return sum;
}

absl::StatusOr<std::string> TcpStoreClient::CompareSet(
    absl::string_view key, absl::string_view expected,
    absl::string_view desired) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(expected));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(desired));
  DEVMESH_ASSIGN_OR_RETURN(
      std::string r, Call({Op::kCompareSet, {key}, {expected, desired}, 0},
                          absl::ZeroDuration()));
  WireReader in(r);
  absl::string_view value;
  if (!in.Bytes(&value)) return Malformed();
  return std::string(value);
}

absl::Status TcpStoreClient::Wait(absl::Span<const std::string> keys,
                                  absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  return Call({Op::kWait, Views(keys), {}, TimeoutMs(timeout)}, timeout)
      .status();
}

absl::StatusOr<bool> TcpStoreClient::Check(absl::Span<const std::string> keys) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  DEVMESH_ASSIGN_OR_RETURN(std::string r, Call({Op::kCheck, Views(keys), {}, 0},
                                               absl::ZeroDuration()));
  WireReader in(r);
  uint8_t all = 0;
  if (!in.U8(&all)) return Malformed();
  return all != 0;
}

absl::StatusOr<bool> TcpStoreClient::DeleteKey(absl::string_view key) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_ASSIGN_OR_RETURN(std::string r, Call({Op::kDeleteKey, {key}, {}, 0},
                                               absl::ZeroDuration()));
  WireReader in(r);
  uint8_t existed = 0;
  if (!in.U8(&existed)) return Malformed();
  return existed != 0;
}

absl::StatusOr<int64_t> TcpStoreClient::DeletePrefix(absl::string_view prefix) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(prefix));
  DEVMESH_ASSIGN_OR_RETURN(std::string r, Call({Op::kDeletePrefix, {prefix}, {}, 0},
                                               absl::ZeroDuration()));
  WireReader in(r);
  int64_t deleted = 0;
  if (!in.I64(&deleted)) return Malformed();
  return deleted;
}

absl::StatusOr<int64_t> TcpStoreClient::NumKeys() {
  DEVMESH_ASSIGN_OR_RETURN(
      std::string r, Call({Op::kNumKeys, {}, {}, 0}, absl::ZeroDuration()));
  WireReader in(r);
  int64_t n = 0;
  if (!in.I64(&n)) return Malformed();
  return n;
}

absl::StatusOr<std::vector<std::string>> TcpStoreClient::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  DEVMESH_ASSIGN_OR_RETURN(
      std::string r,
      Call({Op::kMultiGet, Views(keys), {}, TimeoutMs(timeout)}, timeout));
  WireReader in(r);
  uint32_t n = 0;
  if (!in.U32(&n) || n != keys.size()) return Malformed();
  std::vector<std::string> values;
  values.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    absl::string_view v;
    if (!in.Bytes(&v)) return Malformed();
    values.emplace_back(v);
  }
  return values;
}

absl::Status TcpStoreClient::MultiSet(absl::Span<const std::string> keys,
                                      absl::Span<const std::string> values) {
  DEVMESH_RETURN_IF_ERROR(ValidateMultiSet(keys, values));
  return Call({Op::kMultiSet, Views(keys), Views(values), 0},
              absl::ZeroDuration())
      .status();
}

}  // namespace devmesh
