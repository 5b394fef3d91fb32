// devmesh/store/store.h
// -----------------------------------------------------------------------------
// Store: the key-value store through which ranks find each other (rendezvous,
// communicator ids, barriers). The interface follows PyTorch's c10d::Store:
// keys are byte strings, values are byte strings, `Add` keeps an int64 counter
// stored as its decimal text, and every blocking call has a timeout.
//
// Implementations: InMemoryStore (ranks as threads, tests), PrefixStore (a
// namespace over another store), TcpStoreClient (the TCP store; rank 0 hosts
// the TcpStoreServer), C10dStoreClient (PyTorch's c10d TCPStore protocol:
// torchrun's agent store, a torch TCPStore, or devmesh's server).
//
// Thread-safety: every implementation is safe to call from several threads at
// once; calls from one thread are seen by the server in program order.
#ifndef DEVMESH_STORE_STORE_H_
#define DEVMESH_STORE_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "status/status_macros.h"

namespace devmesh {

class Store {
 public:
  virtual ~Store() = default;

  // The timeout used by Get, Wait and MultiGet when none is given.
  virtual absl::Duration default_timeout() const = 0;

  // Sets `key` to `value`, replacing any earlier value, and wakes every waiter
  // on `key`.
  // Errors:
  //   InvalidArgument  key empty or over the key-length limit; value over the
  //                    value-size limit
  //   Unavailable      connection lost
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Returns the value of `key`, waiting until it is set.
  // Errors:
  //   DeadlineExceeded  `key` is not set within `timeout`
  //   InvalidArgument   as for Set
  //   Unavailable       as for Set
  virtual absl::StatusOr<std::string> Get(absl::string_view key,
                                          absl::Duration timeout) = 0;
  absl::StatusOr<std::string> Get(absl::string_view key) {
    return Get(key, default_timeout());
  }

  // Atomically adds `delta` to the int64 counter at `key` (a missing key
  // counts as 0) and returns the new value.
  // Errors:
  //   InvalidArgument  the key holds a value that is not a decimal int64;
  //                    overflow
  virtual absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) = 0;

  // Atomically: when `key` is missing and `expected` is empty, or `key` holds
  // `expected`, sets it to `desired`. Returns the value `key` holds afterwards
  // (so the caller won iff the result equals `desired`), or, when `key` is
  // missing and `expected` is not empty, `expected` itself (c10d's rule).
  virtual absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                                 absl::string_view expected,
                                                 absl::string_view desired) = 0;

  // Waits until every key in `keys` is set.
  // Errors:
  //   DeadlineExceeded  `timeout` passes first (naming the first missing key)
  virtual absl::Status Wait(absl::Span<const std::string> keys,
                            absl::Duration timeout) = 0;
  absl::Status Wait(absl::Span<const std::string> keys) {
    return Wait(keys, default_timeout());
  }

  // True when every key in `keys` is set right now. Never blocks.
  virtual absl::StatusOr<bool> Check(absl::Span<const std::string> keys) = 0;

  // The value of `key` when it is set now, nullopt when it is not; never
  // waits for it. A Check, then (when set) a Get: one round trip when the
  // key is missing, two when it is set. Not atomic: a key deleted between
  // the two reads is waited for up to default_timeout(). Use it where a
  // missing key is the common answer; a Get with a short timeout costs that
  // timeout when the key is missing (devmesh's server parks the Get until
  // then), and a Get with a zero timeout is not a read on every store
  // (PyTorch's protocol answers it after its deadline, so it fails even for
  // a key that is set).
  // Errors: those of Check and Get.
  absl::StatusOr<std::optional<std::string>> GetIfSet(absl::string_view key) {
    const std::string k(key);
    DEVMESH_ASSIGN_OR_RETURN(bool set, Check(absl::MakeConstSpan(&k, 1)));
    if (!set) return std::optional<std::string>();
    DEVMESH_ASSIGN_OR_RETURN(std::string value, Get(key));
    return std::optional<std::string>(std::move(value));
  }

  // Deletes `key`; returns whether it existed.
  virtual absl::StatusOr<bool> DeleteKey(absl::string_view key) = 0;

  // Deletes every key that begins with `prefix`; returns how many it
  // deleted. One round trip; a key set meanwhile under `prefix` may be left.
  // Every store of devmesh's implements it. The default, for Store
  // subclasses written before it existed, deletes nothing and answers
  // Unimplemented: devmesh then keeps the keys it would have deleted (the
  // group keys of retired epochs, see device_mesh/spare_registry.h) and
  // works as before; override it to have them deleted.
  // Errors:
  //   InvalidArgument  `prefix` empty or over the key-length limit
  //   Unavailable      connection lost
  //   Unimplemented    the subclass does not override it (the default)
  virtual absl::StatusOr<int64_t> DeletePrefix(absl::string_view prefix) {
    return absl::UnimplementedError(absl::StrCat(
        "this Store subclass does not implement DeletePrefix (asked to "
        "delete the keys under '",
        prefix.substr(0, 100),
        "'): nothing was deleted; override Store::DeletePrefix to delete "
        "them"));
  }

  // The number of keys in the store (the whole store, not a prefix of it).
  virtual absl::StatusOr<int64_t> NumKeys() = 0;

  // Get of several keys in one round trip; values in the order of `keys`.
  virtual absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) = 0;

  // Set of several keys in one round trip.
  // Errors:
  //   InvalidArgument  the spans differ in length
  virtual absl::Status MultiSet(absl::Span<const std::string> keys,
                                absl::Span<const std::string> values) = 0;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_STORE_H_
