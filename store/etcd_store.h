// devmesh/store/etcd_store.h
// -----------------------------------------------------------------------------
// EtcdStore: the Store over an etcd cluster (3.4 or later), through etcd's v3
// JSON gateway on its client URLs. Every key of the store lives under
// options.key_prefix in etcd (one prefix per job), so several jobs share one
// etcd; keys and values are byte strings, as in store.h.
//
//   EtcdStoreOptions options;
//   options.endpoints = {"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"};
//   options.key_prefix = "/devmesh/job-42/";
//   DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<EtcdStore> store,
//                            EtcdStore::Connect(options));
//   DEVMESH_RETURN_IF_ERROR(store->Set("rank0/addr", "10.0.0.7:29500"));
//
// Each operation in etcd's terms: Set is a put; Get a range and, while the
// key is missing, a watch from the range's revision until a put of it; Add
// a range then one txn of options.add_guesses nested guesses ("holds v: put
// v + delta; else holds v + delta: put v + 2 delta; ..."; the innermost else
// reads the key), so that adders racing on one counter find their
// predecessors' sum among the guesses; all missed: again after a random
// wait and a fresh range;
// Add(key, 0) of a key that exists only the range (of a value not in
// canonical decimal form: a txn conditional on its mod_revision, retried
// after random waits); CompareSet one txn
// (compare the value with `expected`, or version 0 when `expected` is "";
// put; else read the key), linearizable whatever member answers; Check,
// MultiGet and MultiSet one txn per 128 keys (etcd's default --max-txn-ops);
// DeleteKey a deleterange; NumKeys a count-only range over the prefix.
// Waiting calls watch, never poll; a watch is opened anew (after a read) every
// 5 s, so that a member that stops answering without closing its streams
// delays a waiter by at most that.
//
// Endpoints: a call goes to the endpoint that answered last; one that cannot
// be reached, or does not answer within options.attempt_timeout, is skipped
// for the next, round after round until the call's deadline. A CompareSet
// whose txn may or may not have been applied (its member failed after it was
// sent) sends the same txn again: if the first applied, the second fails its
// compare and returns the value that won (the caller's own), so the answer
// is the one CompareSet semantics give; this holds while nothing sets the
// key back to `expected` between the two. An Add's txn is never sent twice
// (a copy would apply at its next guess: added twice), and its member is
// given until the deadline to answer (a slow member still applies it); a
// connection that fails after it was sent makes the Add Unavailable, saying
// it may or may not have been applied. Add(key, 0) (a revision-compared
// write) is sent again when a read from any member shows the key unchanged.
//
// Timeouts: Get/Wait/MultiGet wait at most their `timeout`; every round trip
// is bounded by options.default_timeout, and each connection attempt by
// options.connect_timeout.
//
// Errors, besides those store.h states for each method:
//   InvalidArgument   empty key; a request over etcd's size limit
//                     (--max-request-bytes, 1.5 MiB by default), named
//   Unavailable       no endpoint answered by the deadline (names each one
//                     and curl's error; a cluster without a leader is named
//                     as having lost quorum); an Add whose txn may or may
//                     not have been applied (see Endpoints)
//   DeadlineExceeded  a waiting call's timeout (names the first missing key),
//                     or a round trip past default_timeout
// NumKeys counts the keys under key_prefix: the store's whole key space.
//
// Thread-safety: every method may be called from any number of threads.
#ifndef DEVMESH_STORE_ETCD_STORE_H_
#define DEVMESH_STORE_ETCD_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

// clang-format off
// clang-format on

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "store/store.h"

namespace devmesh {

class EtcdHttp;

struct EtcdStoreOptions {
  // etcd client URLs as "host:port" (or "http://host:port"); at least one.
  std::vector<std::string> endpoints;
  // Prepended to every key in etcd; must not be empty ("/devmesh/<job>/").
  std::string key_prefix;
  // Store::default_timeout(), and the bound of each round trip.
  absl::Duration default_timeout = absl::Seconds(300);
  // How long one attempt to connect to one endpoint may take.
  absl::Duration connect_timeout = absl::Seconds(5);
  // How long one member may take to answer one request (a watch: to start
  // answering) before the next one is tried; keep it below the failure
  // watch's lease silence, so that a stopped member delays no rank's lease.
  absl::Duration attempt_timeout = absl::Seconds(1);
  // How many values one Add's txn guesses the key holds (1..100; etcd's
  // --max-txn-ops, 128 by default, bounds the nesting). Up to this many
  // adders racing on one counter each land in one txn; but etcd's cost of a
  // txn grows with its depth (one Add alone on etcd 3.4: 1.8 ms at 4, 3.1
  // ms at 8, 10.6 ms at 32), and at 32 a burst of 256 adders on one host
  // kept etcd too busy to answer within attempt_timeout.
  int add_guesses = 4;
};

class EtcdStore : public Store {
 public:
  // Checks `options` and that some endpoint answers as etcd.
  // Errors: InvalidArgument (no endpoints, an endpoint that is not host:port
  // with a port in 1..65535, https://, an empty key_prefix, a timeout <= 0),
  // Unavailable (no endpoint answered; names each and curl's error).
  static absl::StatusOr<std::unique_ptr<EtcdStore>> Connect(
      const EtcdStoreOptions& options);
  ~EtcdStore() override;

  absl::Duration default_timeout() const override {
    return options_.default_timeout;
  }
  // Store's methods; errors as in store.h and at the top of this file.
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> DeletePrefix(absl::string_view prefix) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  using Store::Get;
  using Store::Wait;

  // HTTP requests this store has sent to etcd (every attempt on every
  // endpoint; a watch counts one): a Store call costs one or more.
  int64_t requests() const;

  // ---- Leases (etcd's), for liveness (device_mesh/rank_liveness.h) -------
  // A lease lives for its TTL unless kept alive; when it expires (etcd's
  // leader's clock) or is revoked, etcd deletes every key attached to it.
  // Defined in etcd_lease.cc. Errors, besides Unavailable and
  // DeadlineExceeded as for every call: those stated per method.
  struct Lease {
    int64_t id = 0;
    absl::Duration ttl;  // as granted: whole seconds, at least etcd's minimum
  };
  // Grants a lease of `ttl` rounded up to whole seconds (etcd raises it to
  // its minimum, 2 s with default settings). InvalidArgument for ttl <= 0.
  absl::StatusOr<Lease> GrantLease(absl::Duration ttl);
  // Renews lease `id` for its TTL. NotFound when it has expired or was
  // revoked (its keys are gone). `deadline` bounds it below the round
  // trip's (a keepalive answered after the lease's expiry is of no use):
  // DeadlineExceeded past it.
  absl::Status KeepAlive(int64_t id,
                         absl::Time deadline = absl::InfiniteFuture());
  // Ends lease `id` now, deleting its keys; OK when it was gone already.
  absl::Status RevokeLease(int64_t id);
  // Set(key, value), with the key attached to lease `id`. NotFound when the
  // lease has expired.
  absl::Status SetWithLease(absl::string_view key, absl::string_view value,
                            int64_t id);
  // Waits up to `timeout` until `key`'s presence is other than `present`
  // (deleted, when `present`; set, when not), by a read and then a watch
  // from the read's revision, and returns its presence then: `present`
  // when the timeout passed first (not an error).
  absl::StatusOr<bool> AwaitPresence(absl::string_view key, bool present,
                                     absl::Duration timeout);

 private:
  // A key as etcd holds it: found or not, its value and mod_revision.
  struct Entry {
    bool found = false;
    std::string value;
    int64_t mod_revision = 0;
  };
  // Several keys read at once, and the revision they were read at.
  struct Snapshot {
    std::vector<Entry> entries;
    int64_t revision = 0;
  };

  // Watches of missing keys kept open between Gets (etcd_store.cc).
  struct Lingering;
  struct Watches;

  EtcdStore(EtcdStoreOptions options, std::unique_ptr<EtcdHttp> http);

  absl::Time RoundTripDeadline() const;
  // Reads `keys` (already prefixed) in txns of at most 128 ranges each;
  // `count_only` leaves the values out.
  absl::StatusOr<Snapshot> Read(const std::vector<std::string>& keys,
                                bool count_only);
  // Watches `key` (prefixed) from `revision` until a put of it (its value),
  // or nullopt when etcd ended the watch first (compaction) or after 5 s
  // (the caller reads again); errors:
  // DeadlineExceeded at `deadline`, naming the key.
  absl::StatusOr<std::optional<std::string>> WatchForPut(const std::string& key,
                                                         int64_t revision,
                                                         absl::Time deadline);
  // The lingering watch of `key` (prefixed), started from `revision` (just
  // after a read that found it missing) unless one is open already; null
  // when the store keeps its most (kMaxLingering, etcd_store.cc) already.
  std::shared_ptr<Lingering> Linger(const std::string& key, int64_t revision);
  // Watches the range of `keys` (prefixed, at least 2) from `revision` until
  // each has been put: OK; Aborted when the watch ended first (its slice,
  // compaction: the caller reads again); DeadlineExceeded at `deadline`.
  absl::Status WatchForPuts(std::vector<std::string> keys, int64_t revision,
                            absl::Time deadline);
  // Waits up to `timeout` until every key of `keys` (prefixed) is set;
  // DeadlineExceeded naming the first missing one.
  absl::Status WaitPrefixed(const std::vector<std::string>& keys,
                            absl::Duration timeout);
  // Read-modify-write of `key` (prefixed): `next` gets the entry and returns
  // the value to write (nullopt: none); retried while others write first.
  // `idempotent`: applying the update twice is applying it once (see the
  // Endpoints paragraph at the top).
  absl::Status Update(
      const std::string& key,
      const std::function<
          absl::StatusOr<std::optional<std::string>>(const Entry&)>& next,
      bool idempotent);
  // `keys` checked (none empty) and prefixed.
  absl::StatusOr<std::vector<std::string>> Prefixed(
      absl::Span<const std::string> keys) const;
  std::string UserKey(const std::string& prefixed) const;

  const EtcdStoreOptions options_;
  // Shared with the threads of lingering watches, which may outlive this.
  const std::shared_ptr<EtcdHttp> http_;
  const std::shared_ptr<Watches> watches_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_ETCD_STORE_H_
