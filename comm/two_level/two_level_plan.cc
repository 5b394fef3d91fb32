// devmesh/comm/two_level/two_level_plan.cc
#include "comm/two_level/two_level_plan.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace devmesh {

std::optional<TwoLevelPlan> PlanTwoLevel(absl::Span<const std::string> host_keys,
                                         int rank) {
  const int n = static_cast<int>(host_keys.size());
  if (rank < 0 || rank >= n) return std::nullopt;
  absl::flat_hash_map<std::string, int> host_of_key;
  std::vector<int> host(n), local(n);
  std::vector<int> counts;
  for (int r = 0; r < n; ++r) {
    auto [it, added] = host_of_key.emplace(host_keys[r], counts.size());
    if (added) counts.push_back(0);
    host[r] = it->second;
    local[r] = counts[it->second]++;
  }
  const int hosts = static_cast<int>(counts.size());
  if (hosts < 2 || counts[0] < 2) return std::nullopt;
  for (int c : counts) {
    if (c != counts[0]) return std::nullopt;
  }
  TwoLevelPlan plan;
  plan.hosts = hosts;
  plan.local_size = counts[0];
  plan.host = host[rank];
  plan.local_index = local[rank];
  plan.inter_members.assign(hosts, -1);
  for (int r = 0; r < n; ++r) {
    if (host[r] == plan.host) plan.intra_members.push_back(r);
    if (local[r] == plan.local_index) plan.inter_members[host[r]] = r;
  }
  return plan;
}

}  // namespace devmesh
