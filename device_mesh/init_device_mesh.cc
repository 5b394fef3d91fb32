#include "device_mesh/init_device_mesh.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

absl::StatusOr<DeviceMesh> InitDeviceMesh(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names, MeshOptions options) {
  if (!mesh_dim_names.empty()) {
    absl::flat_hash_set<std::string> seen;
    for (const std::string& name : mesh_dim_names) {
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "each mesh_dim_name must be unique; '", name,
            "' is repeated in mesh_dim_names [",
            absl::StrJoin(mesh_dim_names, ", "), "]"));
      }
    }
    if (mesh_dim_names.size() != mesh_shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh_shape and mesh_dim_names must have the same length: ",
          mesh_shape.size(), " sizes [", absl::StrJoin(mesh_shape, ", "),
          "] but ", mesh_dim_names.size(), " names [",
          absl::StrJoin(mesh_dim_names, ", "), "]"));
    }
  }
  bool word = !device_type.empty();
  for (char c : device_type) word = word && absl::ascii_isalpha(c);
  if (!word) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device type with an index is not supported, got '", device_type,
        "': pass the device type only, such as \"cuda\" or \"cpu\""));
  }
  if (runtime == nullptr || runtime->detached()) {
    return absl::FailedPreconditionError(
        "InitDeviceMesh needs an initialised bootstrap (rendezvous) first");
  }
  if (mesh_shape.empty()) {
    return absl::InvalidArgumentError("mesh_shape must not be empty");
  }
  int64_t product = 1;
  for (int64_t size : mesh_shape) {
    if (size <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh_shape must hold positive sizes, got [",
                       absl::StrJoin(mesh_shape, ", "), "]"));
    }
    if (product > runtime->world_size()) break;  // No overflow: mismatch.
    product *= size;
  }
  if (product != runtime->world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh_shape product (", product, ") must equal world size (",
        runtime->world_size(), ")"));
  }
  auto layout = MeshLayout::FromShape(mesh_shape, std::move(mesh_dim_names));
  if (!layout.ok()) return layout.status();
  return DeviceMesh::FromLayout(std::move(runtime), device_type,
                                *std::move(layout), std::move(options));
}

}  // namespace devmesh
