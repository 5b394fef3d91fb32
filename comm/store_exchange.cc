// devmesh/comm/store_exchange.cc
#include "comm/store_exchange.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/communicator.h"
#include "comm/group_args.h"
#include "status/status_macros.h"

namespace devmesh {
namespace comm_internal {

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::Milliseconds(1));
}

absl::StatusOr<std::vector<std::string>> StoreAllGather(
    Store& store, const std::vector<std::string>& keys,
    const std::vector<int>& global_ranks, absl::Time deadline,
    absl::string_view what, absl::string_view missing_means,
    int64_t* round_trips) {
  ++*round_trips;
  auto values = store.MultiGet(keys, Remaining(deadline));
  if (values.ok() || !absl::IsDeadlineExceeded(values.status())) {
    if (!values.ok()) {
      return Reworded(
          values.status(),
          absl::StrCat(what, ": store: ", values.status().message()));
    }
    return values;
  }
  std::vector<int> missing;
  for (size_t r = 0; r < keys.size(); ++r) {
    // A rank may own several keys (a Gloo group's mesh and its sub-mesh):
    // named once, checked until one of its keys is found missing.
    if (std::find(missing.begin(), missing.end(), global_ranks[r]) !=
        missing.end()) {
      continue;
    }
    ++*round_trips;
    auto present = store.Check({keys[r]});
    if (present.ok() && !*present) missing.push_back(global_ranks[r]);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      what, ": global rank(s) [", absl::StrJoin(missing, ", "), "] ",
      missing_means, " before the group's deadline"));
}

absl::StatusOr<std::optional<SplitMembership>> ExchangeSplitColors(
    Store& store, const std::string& base, int rank,
    const std::vector<int>& global_ranks, int color, int key,
    absl::Time deadline, absl::string_view what, int64_t* round_trips) {
  const int size = static_cast<int>(global_ranks.size());
  ++*round_trips;
  if (auto s = store.Set(absl::StrCat(base, "ck/", rank),
                         absl::StrCat(color, " ", key));
      !s.ok()) {
    return Reworded(s, absl::StrCat(what, ": store: ", s.message()));
  }
  if (color == kNoColor) return std::optional<SplitMembership>();
  std::vector<std::string> keys;
  keys.reserve(size);
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat(base, "ck/", r));
  DEVMESH_ASSIGN_OR_RETURN(
      std::vector<std::string> values,
      StoreAllGather(store, keys, global_ranks, deadline, what,
                     "did not call Split", round_trips));
  // Members of my color, ordered by (key, parent rank) as ncclCommSplit.
  std::vector<std::pair<int32_t, int>> members;
  for (int r = 0; r < size; ++r) {
    std::pair<std::string, std::string> ck =
        absl::StrSplit(values[r], absl::MaxSplits(' ', 1));
    int32_t their_color = 0;
    int32_t their_key = 0;
    if (!absl::SimpleAtoi(ck.first, &their_color) ||
        !absl::SimpleAtoi(ck.second, &their_key)) {
      return absl::InternalError(
          absl::StrCat(what, ": global rank ", global_ranks[r], " published \"",
                       values[r], "\" as its (color, key)"));
    }
    if (their_color == color) members.emplace_back(their_key, r);
  }
  std::sort(members.begin(), members.end());
  SplitMembership out;
  out.global_ranks.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank) out.rank = static_cast<int>(i);
    out.global_ranks.push_back(global_ranks[members[i].second]);
  }
  return std::optional<SplitMembership>(std::move(out));
}

absl::StatusOr<StoreSplit> BeginStoreSplit(
    absl::string_view backend, Store& store, const std::string& prefix,
    int64_t seq, int rank, const std::vector<int>& global_ranks,
    const CommOptions& parent, const std::optional<absl::Duration>& timeout,
    int color, int key) {
  StoreSplit out;
  DEVMESH_ASSIGN_OR_RETURN(out.child_options,
                           SplitChildOptions(backend, parent, timeout));
  out.deadline = absl::Now() + out.child_options.timeout;
  out.base = absl::StrCat(prefix, "split/", seq, "/");
  const std::string what =
      absl::StrCat(backend, " split #", seq, " (color ", color, ", key ", key,
                   ", global rank ", global_ranks[rank], ")");
  DEVMESH_ASSIGN_OR_RETURN(
      std::optional<SplitMembership> membership,
      ExchangeSplitColors(store, out.base, rank, global_ranks, color, key,
                          out.deadline, what, &out.round_trips));
  if (membership.has_value()) {
    out.child_rank = membership->rank;
    out.child_options.global_ranks = std::move(membership->global_ranks);
  }
  return out;
}

}  // namespace comm_internal
}  // namespace devmesh
