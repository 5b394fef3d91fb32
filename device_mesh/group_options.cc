#include "device_mesh/group_options.h"

namespace devmesh {

GroupOptions MeshOptions::For(absl::string_view dim_group_name) const {
  GroupOptions out = all;
  auto it = per_dim.find(dim_group_name);
  if (it == per_dim.end()) return out;
  if (!it->second.backend.empty()) out.backend = it->second.backend;
  if (it->second.timeout.has_value()) out.timeout = it->second.timeout;
  return out;
}

absl::string_view DefaultBackendFor(absl::string_view device_type) {
  if (device_type == "cpu") return "gloo";
  if (device_type == "cuda") return "nccl";
  return "";
}

}  // namespace devmesh
