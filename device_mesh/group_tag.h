// devmesh/device_mesh/group_tag.h
// -----------------------------------------------------------------------------
// GroupTag (internal to //device_mesh): a group's name as 16 hex digits,
// FNV-1a 64 of its identity and member list, the same on every member and
// every platform (absl::Hash is seeded per process). MeshRuntime names a
// group's store keys with it; Shrink names a group in its arrival payload.
#ifndef DEVMESH_DEVICE_MESH_GROUP_TAG_H_
#define DEVMESH_DEVICE_MESH_GROUP_TAG_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace devmesh {
namespace device_mesh_internal {

inline std::string GroupTag(absl::string_view identity,
                            const std::vector<int>& members) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](absl::string_view bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(identity);
  mix("|");
  mix(absl::StrJoin(members, ","));
  // Fixed length whatever the world size.
  return absl::StrCat(absl::Hex(hash, absl::kZeroPad16));
}

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_GROUP_TAG_H_
