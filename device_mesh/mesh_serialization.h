// devmesh/device_mesh/mesh_serialization.h
// -----------------------------------------------------------------------------
// The byte form of a DeviceMesh (R16): a magic, a version, then
// length-prefixed fields: device type, MeshLayout::Serialize() bytes, and the
// MeshOptions (sorted by dim name, so equal meshes give equal bytes). Live
// groups are never part of it. Internal to //device_mesh.
#ifndef DEVMESH_DEVICE_MESH_MESH_SERIALIZATION_H_
#define DEVMESH_DEVICE_MESH_MESH_SERIALIZATION_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "device_mesh/group_options.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

struct MeshParts {
  std::string device_type;
  MeshLayout layout;
  MeshOptions options;
};

std::string SerializeMesh(absl::string_view device_type,
                          const MeshLayout& layout,
                          const MeshOptions& options);

// InvalidArgument on a wrong magic or version, truncated or trailing bytes,
// or bad layout bytes (MeshLayout::Deserialize's error).
absl::StatusOr<MeshParts> DeserializeMesh(absl::string_view bytes);

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_SERIALIZATION_H_
