#include "store/etcd_store.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"  // SimpleAtoi
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "status/status_macros.h"
#include "store/etcd_http.h"
#include "store/etcd_json.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace {

using Json = nlohmann::json;
using Retry = EtcdHttp::Retry;
using etcd_internal::Bool;
using etcd_internal::Field;
using etcd_internal::FirstKv;
using etcd_internal::Int64;
using etcd_internal::Kv;
using etcd_internal::PrefixEnd;
using etcd_internal::PutOp;
using etcd_internal::RangeOp;

// etcd's default --max-txn-ops: Check, MultiGet and MultiSet send one txn per
// this many keys.
constexpr size_t kMaxTxnOps = 128;

// The longest one watch lasts before a waiting call reads again (see
// WatchForPut).
constexpr absl::Duration kWatchSlice = absl::Seconds(5);

// The most keys a store keeps lingering watches of (each a connection to
// etcd, 3 fds, for up to kWatchSlice after its last Get).
constexpr size_t kMaxLingering = 2;

// A Get of at least this timeout that waits on a watch another Get opened
// does not read the key again at its deadline (see Get).
constexpr absl::Duration kTrustWatchFor = absl::Milliseconds(100);

// The bound of the random wait after a read-modify-write lost to another
// writer (Update).
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

std::string B64(absl::string_view bytes) { return absl::Base64Escape(bytes); }

absl::Status EmptyKey() {
  return absl::InvalidArgumentError("store key must not be empty");
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Connect(
    const EtcdStoreOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("EtcdStoreOptions.endpoints is empty");
  }
  if (options.key_prefix.empty()) {
    return absl::InvalidArgumentError(
        "EtcdStoreOptions.key_prefix is empty: give each job its own prefix, "
        "such as \"/devmesh/<job id>/\"");
  }
  if (options.default_timeout <= absl::ZeroDuration() ||
      options.connect_timeout <= absl::ZeroDuration() ||
      options.attempt_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "EtcdStoreOptions.default_timeout, connect_timeout and "
        "attempt_timeout must be > 0");
  }
  if (options.add_guesses < 1 || options.add_guesses > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("EtcdStoreOptions.add_guesses is ", options.add_guesses,
                     ": it must be in 1..100"));
  }
  EtcdStoreOptions checked = options;
  for (std::string& endpoint : checked.endpoints) {
    if (absl::StartsWith(endpoint, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "etcd endpoint '", endpoint, "': TLS is not supported yet"));
    }
    absl::string_view e = endpoint;
    absl::ConsumePrefix(&e, "http://");
    absl::ConsumeSuffix(&e, "/");
    const size_t colon = e.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(e.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", endpoint,
                       "' is not host:port with a port in 1..65535"));
    }
    endpoint = std::string(e);
  }
  auto http =
      std::make_unique<EtcdHttp>(checked.endpoints, checked.connect_timeout,
                                 checked.attempt_timeout);
  const absl::Duration probe_for =
      std::min(checked.default_timeout,
               checked.connect_timeout *
                   static_cast<int64_t>(checked.endpoints.size() + 1));
  absl::StatusOr<Json> status =
      http->Post("/v3/maintenance/status", Json::object(),
                 absl::Now() + probe_for, Retry::kIdempotent);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach etcd at ",
                                               http->EndpointList(), ": ",
                                               status.status().message()));
  }
  return std::unique_ptr<EtcdStore>(
      new EtcdStore(std::move(checked), std::move(http)));
}

EtcdStore::EtcdStore(EtcdStoreOptions options, std::unique_ptr<EtcdHttp> http)
    : options_(std::move(options)),
      http_(std::move(http)),
      watches_(std::make_shared<Watches>()) {}

EtcdStore::~EtcdStore() = default;

int64_t EtcdStore::requests() const { return http_->requests(); }

absl::Time EtcdStore::RoundTripDeadline() const {
  return absl::Now() + options_.default_timeout;
}

absl::StatusOr<std::vector<std::string>> EtcdStore::Prefixed(
    absl::Span<const std::string> keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) {
    if (key.empty()) return EmptyKey();
    out.push_back(options_.key_prefix + key);
  }
  return out;
}

std::string EtcdStore::UserKey(const std::string& prefixed) const {
  return absl::CHexEscape(prefixed.substr(options_.key_prefix.size()));
}

absl::StatusOr<EtcdStore::Snapshot> EtcdStore::Read(
    const std::vector<std::string>& keys, bool count_only) {
  Snapshot snapshot;
  snapshot.entries.resize(keys.size());
  for (size_t begin = 0; begin < keys.size(); begin += kMaxTxnOps) {
    const size_t end = std::min(keys.size(), begin + kMaxTxnOps);
    Json ops = Json::array();
    for (size_t i = begin; i < end; ++i) {
      ops.push_back(RangeOp(keys[i], count_only));
    }
    DEVMESH_ASSIGN_OR_RETURN(
        Json reply, http_->Post("/v3/kv/txn", Json{{"success", ops}},
                                RoundTripDeadline(), Retry::kIdempotent));
    const Json& responses = Field(reply, "responses");
    if (!responses.is_array() || responses.size() != end - begin) {
      return absl::InternalError(absl::StrCat(
          "etcd answered a txn of ", end - begin, " ranges with ",
          responses.is_array() ? responses.size() : 0, " responses"));
    }
    const int64_t revision = Int64(Field(reply, "header"), "revision");
    if (begin == 0 || revision < snapshot.revision) {
      snapshot.revision = revision;
    }
    for (size_t i = begin; i < end; ++i) {
      const Json& range = Field(responses[i - begin], "response_range");
      Entry& entry = snapshot.entries[i];
      entry.found = Int64(range, "count") > 0;
      if (!count_only && entry.found) {
        DEVMESH_ASSIGN_OR_RETURN(Kv kv, FirstKv(range));
        entry.value = std::move(kv.value);
        entry.mod_revision = kv.mod_revision;
      }
    }
  }
  return snapshot;
}

absl::StatusOr<std::optional<std::string>> EtcdStore::WatchForPut(
    const std::string& key, int64_t revision, absl::Time deadline) {
  const std::string key64 = B64(key);
  const Json request = {
      {"create_request",
       {{"key", key64}, {"start_revision", absl::StrCat(revision)}}}};
  std::optional<std::string> value;
  // A watch lasts at most kWatchSlice; then the caller reads again (from
  // whichever member answers) and watches anew. A member that stops (SIGSTOP,
  // a frozen VM) keeps its streams open but sends nothing: this bounds how
  // long a waiter can miss a put made through another member.
  const absl::Time slice_end = std::min(deadline, absl::Now() + kWatchSlice);
  absl::Status streamed = http_->Stream(
      "/v3/watch", request, slice_end,
      [&](const Json& result) -> absl::StatusOr<bool> {
        if (Bool(result, "canceled")) {
          return true;  // compacted past `revision`: the caller reads again
        }
        const Json& events = Field(result, "events");
        if (!events.is_array()) return false;
        for (const Json& event : events) {
          const Json& type = Field(event, "type");
          const Json& kv = Field(event, "kv");
          if ((type.is_null() || type == "PUT") && Field(kv, "key") == key64) {
            DEVMESH_ASSIGN_OR_RETURN(std::string v,
                                     etcd_internal::Bytes(kv, "value"));
            value = std::move(v);
            return true;
          }
        }
        return false;
      });
  if (absl::IsDeadlineExceeded(streamed) && slice_end < deadline &&
      absl::Now() < deadline) {
    return std::optional<std::string>();  // the slice ended: read again
  }
  DEVMESH_RETURN_IF_ERROR(streamed);
  return value;
}

absl::Status EtcdStore::WatchForPuts(std::vector<std::string> keys,
                                     int64_t revision, absl::Time deadline) {
  std::sort(keys.begin(), keys.end());
  absl::flat_hash_set<std::string> waiting;
  for (const std::string& k : keys) waiting.insert(B64(k));
  const Json request = {
      {"create_request",
       {{"key", B64(keys.front())},
        {"range_end", B64(keys.back() + std::string(1, '\0'))},
        {"start_revision", absl::StrCat(revision)}}}};
  // At most kWatchSlice, as WatchForPut (a member that stopped).
  const absl::Time slice_end = std::min(deadline, absl::Now() + kWatchSlice);
  bool canceled = false;
  absl::Status streamed = http_->Stream(
      "/v3/watch", request, slice_end,
      [&](const Json& result) -> absl::StatusOr<bool> {
        if (Bool(result, "canceled")) {
          canceled = true;
          return true;  // compacted past `revision`: the caller reads again
        }
        const Json& events = Field(result, "events");
        if (!events.is_array()) return false;
        for (const Json& event : events) {
          const Json& type = Field(event, "type");
          const Json& key = Field(Field(event, "kv"), "key");
          if ((type.is_null() || type == "PUT") && key.is_string()) {
            waiting.erase(key.get<std::string>());
          }
        }
        return waiting.empty();
      });
  if (streamed.ok() && !canceled && waiting.empty()) return absl::OkStatus();
  if (canceled ||
      (absl::IsDeadlineExceeded(streamed) && slice_end < deadline &&
       absl::Now() < deadline)) {
    return absl::AbortedError("read again");  // the caller reads again
  }
  return streamed.ok() ? absl::AbortedError("read again") : streamed;
}

absl::Status EtcdStore::WaitPrefixed(const std::vector<std::string>& keys,
                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read(keys, true));
    size_t missing = 0;
    while (missing < keys.size() && snapshot.entries[missing].found) ++missing;
    if (missing == keys.size()) return absl::OkStatus();
    absl::Status watched = absl::DeadlineExceededError("");
    if (absl::Now() < deadline) {
      std::vector<std::string> absent;
      for (size_t i = missing; i < keys.size(); ++i) {
        if (!snapshot.entries[i].found) absent.push_back(keys[i]);
      }
      if (absent.size() == 1) {
        watched = WatchForPut(absent[0], snapshot.revision + 1, deadline)
                      .status();
      } else {
        // Every missing key in one watch, of the range from the least to
        // just past the greatest: the wait ends when each has been put,
        // whatever the order (a watch of the first missing key, then a
        // read of all of them again, was one round of requests per key: a
        // leader waiting for 1023 marks made hundreds of reads of 1023 keys
        // on a loaded member). Puts of other keys in the range are skipped.
        watched = WatchForPuts(absent, snapshot.revision + 1, deadline);
        if (watched.ok()) return absl::OkStatus();
      }
    }
    if (absl::IsAborted(watched)) continue;  // WatchForPuts: read again
    if (absl::IsDeadlineExceeded(watched)) {
      return absl::DeadlineExceededError(
          absl::StrCat("store key '", UserKey(keys[missing]),
                       "' was not set within ", absl::FormatDuration(timeout),
                       " (etcd key '", absl::CHexEscape(keys[missing]), "' at ",
                       http_->EndpointList(), ")"));
    }
    DEVMESH_RETURN_IF_ERROR(watched);
  }
}

absl::Status EtcdStore::Set(absl::string_view key, absl::string_view value) {
  if (key.empty()) return EmptyKey();
  return http_
      ->Post("/v3/kv/put",
             Json{{"key", B64(absl::StrCat(options_.key_prefix, key))},
                  {"value", B64(value)}},
             RoundTripDeadline(), Retry::kIdempotent)
      .status();
}

// A watch of one missing key, on a thread of its own, kept open for
// kWatchSlice whatever the Gets that wait on it: a key waited for again and
// again with short timeouts (the failure watch's parked Get of its epoch's
// death key, every lease period on every rank) costs one watch a slice, not
// a read and a new watch (a connection to etcd) per Get. It ends at the
// first put of its key (the value), at the slice's end, or on an error.
struct EtcdStore::Lingering {
  sync_internal::Mutex mu;
  sync_internal::CondVar changed;
  bool ended ABSL_GUARDED_BY(mu) = false;
  std::optional<std::string> value ABSL_GUARDED_BY(mu);  // its put's
  absl::Status error ABSL_GUARDED_BY(mu);  // the watch's, when it failed
};

// The lingering watches of a store, by prefixed key (at most one each).
struct EtcdStore::Watches {
  sync_internal::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Lingering>> by_key
      ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::string> EtcdStore::Get(absl::string_view key,
                                           absl::Duration timeout) {
  if (key.empty()) return EmptyKey();
  const std::vector<std::string> keys = {
      absl::StrCat(options_.key_prefix, key)};
  const std::string& prefixed = keys[0];
  const absl::Time deadline = absl::Now() + timeout;
  auto not_set = [&] {
    return absl::DeadlineExceededError(absl::StrCat(
        "Get: store key '", absl::CHexEscape(key), "' was not set within ",
        absl::FormatDuration(timeout), " (etcd key '",
        absl::CHexEscape(prefixed), "' at ", http_->EndpointList(), ")"));
  };
  for (;;) {
    // A watch of the key that another Get started (its puts since that
    // Get's read), else a read and a watch from just after it.
    std::shared_ptr<Lingering> watch;
    {
      sync_internal::MutexLock lock(&watches_->mu);
      auto it = watches_->by_key.find(prefixed);
      if (it != watches_->by_key.end()) watch = it->second;
    }
    const bool read_here = watch == nullptr;
    if (read_here) {
      DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read(keys, false));
      if (snapshot.entries[0].found) {
        return std::move(snapshot.entries[0].value);
      }
      if (absl::Now() >= deadline) return not_set();
      watch = Linger(prefixed, snapshot.revision + 1);
      if (watch == nullptr) {
        // kMaxLingering keys watched already: a watch of this Get's own.
        absl::StatusOr<std::optional<std::string>> put =
            WatchForPut(prefixed, snapshot.revision + 1, deadline);
        if (absl::IsDeadlineExceeded(put.status())) return not_set();
        DEVMESH_RETURN_IF_ERROR(put.status());
        if (put->has_value()) return std::move(**put);
        continue;
      }
    }
    bool ended = false;
    {
      sync_internal::MutexLock lock(&watch->mu);
      // (The watch ends within its slice: the wait is bounded by that too,
      // whatever the timeout.)
      while (!watch->ended && !watch->value.has_value() &&
             absl::Now() < deadline) {
        (void)watch->changed.WaitWithDeadline(
            &watch->mu, std::min(deadline, absl::Now() + 2 * kWatchSlice));
      }
      if (watch->value.has_value()) return *watch->value;
      if (!watch->error.ok()) return watch->error;
      ended = watch->ended;
    }
    if (ended) continue;  // the slice ended (or etcd compacted): read again
    // This Get's deadline. A watch this Get started saw every put since
    // its read. One it found may not have delivered a put made just before
    // this Get began: it is trusted for a timeout of kTrustWatchFor or more
    // (etcd sends a put's event within milliseconds of applying it; a later
    // Get sees it), and a shorter Get reads once more. (A read at the end
    // of every Get was a request per lease period per rank, the most of
    // etcd's load at 512 ranks.)
    if (!read_here && timeout < kTrustWatchFor) {
      DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read(keys, false));
      if (snapshot.entries[0].found) {
        return std::move(snapshot.entries[0].value);
      }
    }
    return not_set();
  }
}

std::shared_ptr<EtcdStore::Lingering> EtcdStore::Linger(
    const std::string& key, int64_t revision) {
  sync_internal::MutexLock lock(&watches_->mu);
  auto it = watches_->by_key.find(key);
  if (it != watches_->by_key.end()) return it->second;  // another Get's
  if (watches_->by_key.size() >= kMaxLingering) return nullptr;
  std::shared_ptr<Lingering>& slot = watches_->by_key[key];
  auto watch = std::make_shared<Lingering>();
  slot = watch;
  const std::string key64 = B64(key);
  const Json request = {
      {"create_request",
       {{"key", key64}, {"start_revision", absl::StrCat(revision)}}}};
  // Detached: it owns what it touches, and ends by itself within the slice
  // (also after this store is gone).
  std::thread([http = http_, watches = watches_, watch, key, key64, request] {
    std::optional<std::string> value;
    absl::Status streamed = http->Stream(
        "/v3/watch", request, absl::Now() + kWatchSlice,
        [&](const Json& result) -> absl::StatusOr<bool> {
          if (Bool(result, "canceled")) return true;  // compacted: read again
          const Json& events = Field(result, "events");
          if (!events.is_array()) return false;
          for (const Json& event : events) {
            const Json& type = Field(event, "type");
            const Json& kv = Field(event, "kv");
            if ((type.is_null() || type == "PUT") &&
                Field(kv, "key") == key64) {
              DEVMESH_ASSIGN_OR_RETURN(std::string v,
                                       etcd_internal::Bytes(kv, "value"));
              value = std::move(v);
              return true;
            }
          }
          return false;
        });
    {
      sync_internal::MutexLock lock(&watches->mu);
      auto it = watches->by_key.find(key);
      if (it != watches->by_key.end() && it->second == watch) {
        watches->by_key.erase(it);
      }
    }
    sync_internal::MutexLock lock(&watch->mu);
    watch->ended = true;
    watch->value = std::move(value);
    // The slice's end is no error: the waiting Gets read again.
    if (!watch->value.has_value() && !absl::IsDeadlineExceeded(streamed)) {
      watch->error = streamed;
    }
    watch->changed.SignalAll();
  }).detach();
  return watch;
}

absl::Status EtcdStore::Update(
    const std::string& key,
    const std::function<
        absl::StatusOr<std::optional<std::string>>(const Entry&)>& next,
    bool idempotent) {
  DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read({key}, false));
  Entry entry = std::move(snapshot.entries[0]);
  const absl::Time deadline = RoundTripDeadline();
  int losses = 0;  // txns that lost to another writer, in a row
  for (;;) {
    DEVMESH_ASSIGN_OR_RETURN(std::optional<std::string> value, next(entry));
    if (!value.has_value()) return absl::OkStatus();
    // The put applies only if nobody wrote the key since `entry` was read;
    // else the txn's failure branch reads it again.
    Json compare = {{"key", B64(key)}, {"result", "EQUAL"}};
    if (entry.found) {
      compare["target"] = "MOD";
      compare["mod_revision"] = absl::StrCat(entry.mod_revision);
    } else {
      compare["target"] = "VERSION";
      compare["version"] = "0";
    }
    const Json txn = {{"compare", Json::array({compare})},
                      {"success", Json::array({PutOp(key, *value)})},
                      {"failure", Json::array({RangeOp(key, false)})}};
    absl::StatusOr<Json> sent =
        http_->Post("/v3/kv/txn", txn, RoundTripDeadline(), Retry::kIfNotSent);
    if (!sent.ok()) {
      if (!absl::IsUnavailable(sent.status()) || !idempotent) {
        return sent.status();
      }
      // The txn may or may not have been applied (a member that stopped or
      // died with it, one without a leader), and may still be, later: it
      // compares the revision read, so it applies only if it comes first.
      // An idempotent update may be sent again when a read from any member
      // shows the key unchanged: whichever of the two applies first, the
      // other fails its compare and the loop sees the update done. Changed:
      // it may have been this txn or another writer's.
      absl::StatusOr<Snapshot> again = Read({key}, false);
      if (!again.ok()) return sent.status();
      Entry now = std::move(again->entries[0]);
      if (now.found != entry.found ||
          (entry.found && now.mod_revision != entry.mod_revision)) {
        return absl::UnavailableError(absl::StrCat(
            "store key '", UserKey(key), "' changed after a txn on it failed (",
            sent.status().message(),
            "): it may or may not have been this call's update"));
      }
      entry = std::move(now);
      if (absl::Now() >= deadline) return sent.status();
      continue;
    }
    const Json& reply = *sent;
    if (Bool(reply, "succeeded")) return absl::OkStatus();
    const Json& responses = Field(reply, "responses");
    if (!responses.is_array() || responses.size() != 1) {
      return absl::InternalError("etcd answered a failed txn without a range");
    }
    DEVMESH_ASSIGN_OR_RETURN(Kv kv,
                             FirstKv(Field(responses[0], "response_range")));
    entry.found = kv.found;
    entry.value = std::move(kv.value);
    entry.mod_revision = kv.mod_revision;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "store key '", UserKey(key), "': other writers kept changing it for ",
          absl::FormatDuration(options_.default_timeout)));
    }
    // Another writer came first. Sent again at once, the txn would race the
    // same crowd (N ranks adding to one counter together cost N^2 / 2 txns,
    // each a Raft write): wait a random time below a bound that doubles with
    // each loss (1 ms, 2 ms, ... 1 s), then read the key afresh (a read is
    // not a Raft write) and try again.
    const absl::Duration bound = std::min(
        kMaxBackoff, absl::Milliseconds(1) * (int64_t{1} << std::min(losses, 10)));
    ++losses;
    thread_local absl::InsecureBitGen bitgen;  // seeded once per thread
    absl::SleepFor(std::min(
        deadline - absl::Now(),
        absl::Microseconds(absl::Uniform<int64_t>(
            bitgen, 0, absl::ToInt64Microseconds(bound) + 1))));
    DEVMESH_ASSIGN_OR_RETURN(Snapshot fresh, Read({key}, false));
    entry = std::move(fresh.entries[0]);
  }
}

absl::StatusOr<int64_t> EtcdStore::Add(absl::string_view key, int64_t delta) {
  if (key.empty()) return EmptyKey();
  const std::string prefixed = absl::StrCat(options_.key_prefix, key);
  int64_t sum = 0;
  auto add_to = [&](const Entry& entry,
                    int64_t* current) -> absl::Status {
    *current = 0;
    if (entry.found && !absl::SimpleAtoi(entry.value, current)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Add on key '", absl::CHexEscape(key), "': its value '",
          absl::CHexEscape(entry.value.substr(0, 64)),
          "' is not a decimal int64"));
    }
    if (__builtin_add_overflow(*current, delta, &sum)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Add on key '", absl::CHexEscape(key), "': ", *current,
                       " + ", delta, " overflows int64"));
    }
    return absl::OkStatus();
  };
  // The revision-compared read-modify-write (Update): Add(key, 0) (a read
  // when the key exists; it writes "0" when it does not, and is idempotent,
  // so it may be sent again after a failure that left it unknown whether it
  // applied), and a value that is not in canonical decimal form.
  auto by_revision = [&]() -> absl::StatusOr<int64_t> {
    DEVMESH_RETURN_IF_ERROR(Update(
        prefixed,
        [&](const Entry& entry) -> absl::StatusOr<std::optional<std::string>> {
          int64_t current = 0;
          DEVMESH_RETURN_IF_ERROR(add_to(entry, &current));
          if (delta == 0 && entry.found) {
            return std::optional<std::string>();  // a linearizable read
          }
          return std::optional<std::string>(absl::StrCat(sum));
        },
        /*idempotent=*/delta == 0));
    return sum;
  };
  if (delta == 0) return by_revision();
  // Many ranks adding to one counter at once (a join count): a txn that
  // compares one revision loses to every writer before it, so N adders cost
  // about N^2 / 2 txns, each a Raft write. Instead one txn guesses: "holds
  // v: put v + delta; else holds v + delta: put v + 2 delta; else ...",
  // options_.add_guesses deep (nested txns), the innermost else reading the
  // key. As etcd applies racing txns in log order, each finds the value its
  // predecessors left among its guesses (when they add the same delta and
  // are no more than the guesses) and succeeds at once. Comparing the value
  // is sound for a sum (whatever happened before, holding v means v + delta
  // is the new sum). Depth costs etcd time (EtcdStoreOptions.add_guesses).
  DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read({prefixed}, false));
  Entry entry = std::move(snapshot.entries[0]);
  const std::string key64 = B64(prefixed);
  const absl::Time deadline = RoundTripDeadline();
  for (int losses = 0;; ++losses) {
    int64_t current = 0;
    DEVMESH_RETURN_IF_ERROR(add_to(entry, &current));
    if (entry.found && entry.value != absl::StrCat(current)) {
      return by_revision();  // "007": the value compare would never match
    }
    // Level i: the key holds bases[i] (level 0, when missing: no key).
    std::vector<int64_t> bases = {current};
    while (bases.size() < static_cast<size_t>(options_.add_guesses)) {
      int64_t next = 0, after = 0;
      if (__builtin_add_overflow(bases.back(), delta, &next) ||
          __builtin_add_overflow(next, delta, &after)) {
        break;
      }
      bases.push_back(next);
    }
    Json txn;
    Json inner = Json::array({RangeOp(prefixed, false)});
    for (size_t i = bases.size(); i-- > 0;) {
      Json compare = {{"key", key64}, {"result", "EQUAL"}};
      if (i == 0 && !entry.found) {
        compare["target"] = "VERSION";
        compare["version"] = "0";
      } else {
        compare["target"] = "VALUE";
        compare["value"] = B64(absl::StrCat(bases[i]));
      }
      Json level = {
          {"compare", Json::array({compare})},
          {"success",
           Json::array({PutOp(prefixed, absl::StrCat(bases[i] + delta))})},
          {"failure", std::move(inner)}};
      if (i == 0) {
        txn = std::move(level);
      } else {
        inner = Json::array({Json{{"request_txn", std::move(level)}}});
      }
    }
    // Never sent twice: a second copy would apply at its next guess. Nor
    // given up after attempt_timeout: a member that is only slow (256 ranks
    // joining on 2 cores took over 1 s) still applies it, and the Add would
    // fail though its txn succeeded.
    DEVMESH_ASSIGN_OR_RETURN(
        Json reply,
        http_->Post("/v3/kv/txn", txn, RoundTripDeadline(), Retry::kOnce));
    const Json* level = &reply;
    for (size_t i = 0;; ++i) {
      if (Bool(*level, "succeeded")) return bases[i] + delta;
      const Json& responses = Field(*level, "responses");
      if (!responses.is_array() || responses.size() != 1) {
        return absl::InternalError("etcd answered a failed txn without its else");
      }
      if (i + 1 == bases.size()) {
        DEVMESH_ASSIGN_OR_RETURN(
            Kv kv, FirstKv(Field(responses[0], "response_range")));
        entry.found = kv.found;
        entry.value = std::move(kv.value);
        entry.mod_revision = kv.mod_revision;
        break;
      }
      level = &Field(responses[0], "response_txn");
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "store key '", absl::CHexEscape(key),
          "': other writers kept changing it for ",
          absl::FormatDuration(options_.default_timeout)));
    }
    // Every guess missed (more adders than guesses, or other deltas): a
    // random wait below a bound that doubles with each miss (1 ms .. 1 s, as
    // Update's), so that a crowd thins out rather than resending at once
    // (256 adders on one host resending within 128 ms kept a member too busy
    // to answer within attempt_timeout), then a fresh range: the value just
    // read is stale after the wait, and guesses from it would miss again.
    thread_local absl::InsecureBitGen bitgen;  // seeded once per thread
    const absl::Duration bound = std::min(
        kMaxBackoff,
        absl::Milliseconds(1) * (int64_t{1} << std::min(losses, 10)));
    absl::SleepFor(std::min(
        deadline - absl::Now(),
        absl::Microseconds(absl::Uniform<int64_t>(
            bitgen, 0, absl::ToInt64Microseconds(bound) + 1))));
    DEVMESH_ASSIGN_OR_RETURN(Snapshot fresh, Read({prefixed}, false));
    entry = std::move(fresh.entries[0]);
  }
}

absl::StatusOr<std::string> EtcdStore::CompareSet(absl::string_view key,
                                                  absl::string_view expected,
                                                  absl::string_view desired) {
  if (key.empty()) return EmptyKey();
  const std::string prefixed = absl::StrCat(options_.key_prefix, key);
  const std::string key64 = B64(prefixed);
  const absl::Time deadline = RoundTripDeadline();
  // c10d's rule: set when missing and `expected` is empty, or when the key
  // holds `expected` (even ""); else report without writing. One txn: its
  // compare is evaluated when etcd applies it, in the order of the Raft log,
  // so the first txn to apply wins whichever member each was sent to.
  bool missing_expected = expected.empty();  // compare "version == 0"
  for (;;) {
    Json compare = {{"key", key64}, {"result", "EQUAL"}};
    if (missing_expected) {
      compare["target"] = "VERSION";
      compare["version"] = "0";
    } else {
      compare["target"] = "VALUE";
      compare["value"] = B64(expected);
    }
    const Json txn = {{"compare", Json::array({compare})},
                      {"success", Json::array({PutOp(prefixed, desired)})},
                      {"failure", Json::array({RangeOp(prefixed, false)})}};
    absl::StatusOr<Json> sent =
        http_->Post("/v3/kv/txn", txn, deadline, Retry::kIfNotSent);
    if (!sent.ok()) {
      if (!absl::IsUnavailable(sent.status())) return sent.status();
      // Applied or not (the member died or lost its leader after the txn was
      // sent; it may even apply later): the same txn is sent again. Had the
      // first applied, the second fails its compare and reads the value that
      // won, this call's own; had it not, whichever applies first decides.
      // (Sound while nothing sets the key back to `expected` in between; a
      // decision key, set once from missing, never is.)
      if (absl::Now() >= deadline) return sent.status();
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    const Json& reply = *sent;
    if (Bool(reply, "succeeded")) return std::string(desired);
    const Json& responses = Field(reply, "responses");
    if (!responses.is_array() || responses.size() != 1) {
      return absl::InternalError("etcd answered a failed txn without a range");
    }
    DEVMESH_ASSIGN_OR_RETURN(Kv kv,
                             FirstKv(Field(responses[0], "response_range")));
    if (!kv.found) {
      if (!expected.empty()) return std::string(expected);
      missing_expected = true;  // deleted since: compare "version == 0"
      if (absl::Now() >= deadline) break;
      continue;
    }
    if (missing_expected && kv.value.empty()) {
      // Present and "": c10d sets it too. Compare the value next time.
      missing_expected = false;
      if (absl::Now() >= deadline) break;
      continue;
    }
    return std::move(kv.value);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "CompareSet on store key '", absl::CHexEscape(key),
      "': other writers kept changing it for ",
      absl::FormatDuration(options_.default_timeout)));
}

absl::Status EtcdStore::Wait(absl::Span<const std::string> keys,
                             absl::Duration timeout) {
  DEVMESH_ASSIGN_OR_RETURN(std::vector<std::string> prefixed, Prefixed(keys));
  return WaitPrefixed(prefixed, timeout);
}

absl::StatusOr<bool> EtcdStore::Check(absl::Span<const std::string> keys) {
  DEVMESH_ASSIGN_OR_RETURN(std::vector<std::string> prefixed, Prefixed(keys));
  DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read(prefixed, true));
  return std::all_of(snapshot.entries.begin(), snapshot.entries.end(),
                     [](const Entry& e) { return e.found; });
}

absl::StatusOr<bool> EtcdStore::DeleteKey(absl::string_view key) {
  if (key.empty()) return EmptyKey();
  DEVMESH_ASSIGN_OR_RETURN(
      Json reply,
      http_->Post("/v3/kv/deleterange",
                  Json{{"key", B64(absl::StrCat(options_.key_prefix, key))}},
                  RoundTripDeadline(), Retry::kIfNotSent));
  return Int64(reply, "deleted") > 0;
}

absl::StatusOr<int64_t> EtcdStore::DeletePrefix(absl::string_view prefix) {
  if (prefix.empty()) return EmptyKey();
  const std::string full = absl::StrCat(options_.key_prefix, prefix);
  DEVMESH_ASSIGN_OR_RETURN(
      Json reply,
      http_->Post("/v3/kv/deleterange",
                  Json{{"key", B64(full)}, {"range_end", B64(PrefixEnd(full))}},
                  RoundTripDeadline(), Retry::kIfNotSent));
  return Int64(reply, "deleted");
}

absl::StatusOr<int64_t> EtcdStore::NumKeys() {
  DEVMESH_ASSIGN_OR_RETURN(
      Json reply,
      http_->Post("/v3/kv/range",
                  Json{{"key", B64(options_.key_prefix)},
                       {"range_end", B64(PrefixEnd(options_.key_prefix))},
                       {"count_only", true}},
                  RoundTripDeadline(), Retry::kIdempotent));
  return Int64(reply, "count");
}

absl::StatusOr<std::vector<std::string>> EtcdStore::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  DEVMESH_ASSIGN_OR_RETURN(std::vector<std::string> prefixed, Prefixed(keys));
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    DEVMESH_ASSIGN_OR_RETURN(Snapshot snapshot, Read(prefixed, false));
    std::vector<std::string> missing;
    for (size_t i = 0; i < prefixed.size(); ++i) {
      if (!snapshot.entries[i].found) missing.push_back(prefixed[i]);
    }
    if (missing.empty()) {
      std::vector<std::string> values;
      values.reserve(keys.size());
      for (Entry& e : snapshot.entries) values.push_back(std::move(e.value));
      return values;
    }
    DEVMESH_RETURN_IF_ERROR(WaitPrefixed(
        missing, std::max(absl::ZeroDuration(), deadline - absl::Now())));
  }
}

absl::Status EtcdStore::MultiSet(absl::Span<const std::string> keys,
                                 absl::Span<const std::string> values) {
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MultiSet: ", keys.size(), " keys but ", values.size(), " values"));
  }
  DEVMESH_ASSIGN_OR_RETURN(std::vector<std::string> prefixed, Prefixed(keys));
  // etcd refuses two puts of one key in a txn: the last value wins, as it
  // would with Sets in order.
  absl::flat_hash_map<absl::string_view, size_t> last;
  for (size_t i = 0; i < prefixed.size(); ++i) last[prefixed[i]] = i;
  std::vector<size_t> order;
  for (size_t i = 0; i < prefixed.size(); ++i) {
    if (last[prefixed[i]] == i) order.push_back(i);
  }
  for (size_t begin = 0; begin < order.size(); begin += kMaxTxnOps) {
    const size_t end = std::min(order.size(), begin + kMaxTxnOps);
    Json ops = Json::array();
    for (size_t j = begin; j < end; ++j) {
      ops.push_back(PutOp(prefixed[order[j]], values[order[j]]));
    }
    DEVMESH_RETURN_IF_ERROR(http_
                                ->Post("/v3/kv/txn", Json{{"success", ops}},
                                       RoundTripDeadline(), Retry::kIdempotent)
                                .status());
  }
  return absl::OkStatus();
}

}  // namespace devmesh
