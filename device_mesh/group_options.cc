#include "device_mesh/group_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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

absl::Status CheckDeviceType(absl::string_view device_type) {
  bool word = !device_type.empty();
  for (char c : device_type) word = word && absl::ascii_isalpha(c);
  if (word) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "device type '", device_type,
      "' must be a plain device type without an index, such as \"cpu\" or "
      "\"cuda\" (not \"cuda:0\")"));
}

}  // namespace devmesh
