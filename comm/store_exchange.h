// devmesh/comm/store_exchange.h
// -----------------------------------------------------------------------------
// Exchanges among a group's members through the store, shared by the CPU
// backends' creation and Split (Gloo's full mesh, the shared-memory set-up):
// an all-gather of one value per member that names the members who did not
// publish in time, and Split's (color, key) exchange.
#ifndef DEVMESH_COMM_STORE_EXCHANGE_H_
#define DEVMESH_COMM_STORE_EXCHANGE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/options.h"
#include "store/store.h"

namespace devmesh {
namespace comm_internal {

// What is left of `deadline`, never under 1 ms (a store call needs a
// positive timeout).
absl::Duration Remaining(absl::Time deadline);

// Waits (until `deadline`) for every key in `keys` (key r belongs to
// global rank global_ranks[r]; a rank may own several keys) and returns the
// values in order; one MultiGet. On a timeout: DeadlineExceeded "<what>:
// global rank(s) [..] <missing_means> before the group's deadline", naming
// each rank with a missing key once (one Check per key of a rank not named
// yet, on this error path only). Other store errors keep their
// code, prefixed with `what`. Adds its round trips to *round_trips.
// Thread-safety: as the store's.
absl::StatusOr<std::vector<std::string>> StoreAllGather(
    Store& store, const std::vector<std::string>& keys,
    const std::vector<int>& global_ranks, absl::Time deadline,
    absl::string_view what, absl::string_view missing_means,
    int64_t* round_trips);

// One member's child after Split's exchange.
struct SplitMembership {
  int rank = -1;                 // in the child
  std::vector<int> global_ranks;  // the child's members, in child order
};

// Split's (color, key) exchange under `base` ("<base>ck/<rank>"): Set this
// rank's pair, then (color != kNoColor) MultiGet every member's: 2 round
// trips, O(size) bytes. Every member that calls it learns the same children,
// ordered by (key, parent rank) as ncclCommSplit; kNoColor returns
// std::nullopt after the Set (such a rank joins no child and waits for
// nobody). `global_ranks` are the parent's, by parent rank. Errors:
// DeadlineExceeded naming the members that did not call Split by
// `deadline` (every waiting member gets the same names); InternalError
// when a member published something that is not "<color> <key>"; store
// errors prefixed with `what`. Adds its round trips to *round_trips.
absl::StatusOr<std::optional<SplitMembership>> ExchangeSplitColors(
    Store& store, const std::string& base, int rank,
    const std::vector<int>& global_ranks, int color, int key,
    absl::Time deadline, absl::string_view what, int64_t* round_trips);

// The first half of a CPU backend's Split through the store, shared by Gloo
// and shm (the color was checked by the front): the child's options (the
// parent's with SplitOptions::timeout; comm/group_args.h), one deadline for
// the whole Split (that timeout from now), and ExchangeSplitColors under
// "<prefix>split/<seq>/". The caller then makes the child under
// "<base><color>" within `deadline`.
struct StoreSplit {
  CommOptions child_options;  // global_ranks: the child's, in child order
  absl::Time deadline;
  std::string base;           // "<prefix>split/<seq>/"
  int child_rank = -1;        // -1: this rank passed kNoColor (no child)
  int64_t round_trips = 0;
};
// Errors: SplitChildOptions' (a timeout that is not positive) and
// ExchangeSplitColors' (messages prefixed "<backend> split #<seq> (color,
// key, global rank)").
absl::StatusOr<StoreSplit> BeginStoreSplit(
    absl::string_view backend, Store& store, const std::string& prefix,
    int64_t seq, int rank, const std::vector<int>& global_ranks,
    const CommOptions& parent, const std::optional<absl::Duration>& timeout,
    int color, int key);

}  // namespace comm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_STORE_EXCHANGE_H_
