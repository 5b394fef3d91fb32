// devmesh/config/version.h
// -----------------------------------------------------------------------------
// devmesh's version: part of what the ranks of a job agree on when they make
// a mesh (device_mesh/mesh_agreement.h), so that ranks built from different
// trees fail at once instead of speaking different protocols.
#ifndef DEVMESH_CONFIG_VERSION_H_
#define DEVMESH_CONFIG_VERSION_H_

namespace devmesh {

// Raised with every change to a wire format, a segment layout or a
// protocol between ranks.
inline constexpr char kDevmeshVersion[] = "0.36.0";

}  // namespace devmesh

#endif  // DEVMESH_CONFIG_VERSION_H_
