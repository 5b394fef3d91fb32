// EtcdStore's leases (etcd_store.h): grant, keep alive, revoke, keys attached
// to a lease, and a wait for a key's presence to change (a lease's key
// deleted by its expiry).
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "status/status_macros.h"
#include "store/etcd_http.h"
#include "store/etcd_json.h"
#include "store/etcd_store.h"

namespace devmesh {
namespace {

using Json = nlohmann::json;
using etcd_internal::Field;
using etcd_internal::Int64;

// The longest one watch lasts before AwaitPresence reads again (as for the
// store's other waits: a stopped member delays a waiter by at most this).
constexpr absl::Duration kWatchSlice = absl::Seconds(5);

absl::Status LeaseGone(int64_t id, absl::string_view what) {
  return absl::NotFoundError(absl::StrCat(
      "etcd lease ", id, " has expired or was revoked (", what,
      "): the keys attached to it are gone"));
}

}  // namespace

absl::StatusOr<EtcdStore::Lease> EtcdStore::GrantLease(absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GrantLease: ttl must be > 0, not ", absl::FormatDuration(ttl)));
  }
  const int64_t seconds =
      absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
  // A grant whose answer is lost leaves a lease nobody keeps alive: it
  // expires by itself, so the grant may be sent again elsewhere.
  DEVMESH_ASSIGN_OR_RETURN(
      Json reply, http_->Post("/v3/lease/grant",
                              Json{{"TTL", absl::StrCat(seconds)}},
                              RoundTripDeadline(), EtcdHttp::Retry::kIdempotent));
  Lease lease;
  lease.id = Int64(reply, "ID");
  lease.ttl = absl::Seconds(Int64(reply, "TTL"));
  if (lease.id == 0 || lease.ttl <= absl::ZeroDuration()) {
    return absl::InternalError(absl::StrCat(
        "etcd answered a lease grant without an ID or TTL: ",
        reply.dump().substr(0, 200)));
  }
  return lease;
}

absl::Status EtcdStore::KeepAlive(int64_t id, absl::Time deadline) {
  // The gateway's keepalive is a stream of one request and one answer,
  // which it ends by itself: read as a POST, so that the connection stays
  // open for the next call. (Ended from this side at its first message, as
  // a watch is, each keepalive cost a connection: 1024 ranks renewing every
  // period opened about a thousand a second on one member.) A TTL of 0
  // (absent) is a lease etcd no longer has.
  DEVMESH_ASSIGN_OR_RETURN(
      Json reply,
      http_->Post("/v3/lease/keepalive", Json{{"ID", absl::StrCat(id)}},
                  std::min(RoundTripDeadline(), deadline),
                  EtcdHttp::Retry::kIdempotent));
  const int64_t ttl = Int64(Field(reply, "result"), "TTL");
  if (ttl <= 0) return LeaseGone(id, "keepalive answered TTL 0");
  return absl::OkStatus();
}

absl::Status EtcdStore::RevokeLease(int64_t id) {
  absl::Status revoked =
      http_
          ->Post("/v3/lease/revoke", Json{{"ID", absl::StrCat(id)}},
                 RoundTripDeadline(), EtcdHttp::Retry::kIdempotent)
          .status();
  // Sent twice (a member failed before answering), or expired already.
  if (absl::IsNotFound(revoked)) return absl::OkStatus();
  return revoked;
}

absl::Status EtcdStore::SetWithLease(absl::string_view key,
                                     absl::string_view value, int64_t id) {
  if (key.empty()) return absl::InvalidArgumentError("store key must not be empty");
  absl::Status put =
      http_
          ->Post("/v3/kv/put",
                 Json{{"key", absl::Base64Escape(
                                  absl::StrCat(options_.key_prefix, key))},
                      {"value", absl::Base64Escape(value)},
                      {"lease", absl::StrCat(id)}},
                 RoundTripDeadline(), EtcdHttp::Retry::kIdempotent)
          .status();
  if (absl::IsNotFound(put)) return LeaseGone(id, put.message());
  return put;
}

absl::StatusOr<bool> EtcdStore::AwaitPresence(absl::string_view key,
                                              bool present,
                                              absl::Duration timeout) {
  if (key.empty()) return absl::InvalidArgumentError("store key must not be empty");
  const std::string prefixed = absl::StrCat(options_.key_prefix, key);
  const std::string key64 = absl::Base64Escape(prefixed);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read({prefixed}, true));
    if (snapshot.entries[0].found != present) return !present;
    if (absl::Now() >= deadline) return present;
    // Watched from just after the read: the first event on the key is the
    // change (a PUT when it was missing, a DELETE when it was there).
    const Json request = {
        {"create_request",
         {{"key", key64},
          {"start_revision", absl::StrCat(snapshot.revision + 1)}}}};
    std::optional<bool> now;
    const absl::Time slice_end = std::min(deadline, absl::Now() + kWatchSlice);
    absl::Status streamed = http_->Stream(
        "/v3/watch", request, slice_end,
        [&](const Json& result) -> absl::StatusOr<bool> {
          if (etcd_internal::Bool(result, "canceled")) return true;  // again
          const Json& events = Field(result, "events");
          if (!events.is_array()) return false;
          for (const Json& event : events) {
            if (Field(Field(event, "kv"), "key") != key64) continue;
            now = Field(event, "type") != "DELETE";
          }
          return now.has_value() && *now != present;
        });
    if (now.has_value() && *now != present) return *now;
    if (absl::IsDeadlineExceeded(streamed)) {
      if (absl::Now() >= deadline) return present;
      continue;  // the slice ended: read again
    }
    DEVMESH_RETURN_IF_ERROR(streamed);
  }
}

}  // namespace devmesh
