// devmesh/comm/two_level/two_level_plan.h
// -----------------------------------------------------------------------------
// The shape of a two-level group: which members share a host, and the two
// kinds of sub-group a member joins.
//
// A group of N members on H hosts with L members on each host (N = H x L,
// H >= 2, L >= 2) is two-level: member r's host is the position of its host
// key among the distinct keys in order of first appearance, its local index
// its position among its host's members in group order. Member r joins
//   - the intra-host group: its host's members, in group order (local
//     index = rank there);
//   - the inter-host group: the members with its local index, one per host,
//     in host order (host = rank there).
// Any other layout (one host, one member on some host, hosts holding
// different counts) is not two-level.
//
// Thread-safety: pure functions.
#ifndef DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_PLAN_H_
#define DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_PLAN_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace devmesh {

struct TwoLevelPlan {
  int hosts = 0;        // H
  int local_size = 0;   // L
  int host = 0;         // this member's host, in [0, H)
  int local_index = 0;  // this member's rank in its intra-host group
  // Group ranks (of the whole group) of the two sub-groups, in their order.
  std::vector<int> intra_members;
  std::vector<int> inter_members;
};

// The plan of group rank `rank` when `host_keys` (one per group rank: a
// host name, or any key equal exactly for members on one host) is
// two-level; nullopt otherwise, or when `rank` is outside the table.
std::optional<TwoLevelPlan> PlanTwoLevel(absl::Span<const std::string> host_keys,
                                         int rank);

}  // namespace devmesh

#endif  // DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_PLAN_H_
