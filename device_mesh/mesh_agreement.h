// devmesh/device_mesh/mesh_agreement.h
// -----------------------------------------------------------------------------
// The mesh agreement (internal to //device_mesh): InitDeviceMesh is a
// collective over the world, and every rank checks that the others asked
// for the same mesh before any group is made, so that a rank that names the
// dims in another order, asks for another shape, other options or runs
// other settings or another devmesh fails with every other rank at once,
// with one InvalidArgument naming the first rank found to differ and the
// field, instead of summing with the wrong partner or waiting for a timeout.
//
// Protocol, under "mesh_agreement/<index>/" in the runtime's store (index:
// MeshRuntime::NextAgreementIndex):
//   rank 0:        Set "spec" (its MeshSpec, encoded), then Get "verdict";
//   every other:   Get "spec"; if it equals its own, Add "agreed" 1 (the
//                  rank that brings it to world - 1 sets "verdict" to OK
//                  with CompareSet) and Get "verdict"; else CompareSet
//                  "verdict" to the mismatch, naming both ranks' values.
// The first verdict written is every rank's. O(1) round trips (rank 0: 2,
// the others: 3) and O(spec) bytes per rank; the waits are the creation
// store's (MeshRuntime::CreationStore: ended by the failure watch's
// verdict) and end by the timeout. A rank that failed before it could
// agree (its own checks) writes its error as the verdict (AbandonMesh), so
// the others fail at once with it too.
//
// Thread-safety: each function is a collective step of one InitDeviceMesh
// call; distinct calls use distinct indices.
#ifndef DEVMESH_DEVICE_MESH_MESH_AGREEMENT_H_
#define DEVMESH_DEVICE_MESH_MESH_AGREEMENT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "device_mesh/group_options.h"
#include "device_mesh/mesh_runtime.h"

namespace devmesh {
namespace device_mesh_internal {

// What the ranks of a mesh must agree on, in order: (field, value), the
// field as the error names it ("mesh shape", "mesh dim names", "options of
// mesh dim 1", "setting DEVMESH_SHM_ONESHOT_MAX", ...).
using MeshSpec = std::vector<std::pair<std::string, std::string>>;

// InitDeviceMesh's spec: devmesh's version, the device type, the shape (with
// -1 resolved), the dim names, each dim's options (MeshOptions::For),
// require_inside_host, and the settings that must agree, parsed
// (config/settings.h's AgreedSettingsText: "unset", or the number).
MeshSpec InitDeviceMeshSpec(absl::string_view device_type,
                            absl::Span<const int64_t> shape,
                            const std::vector<std::string>& names,
                            const MeshOptions& options);

// Length-prefixed text of `spec`, and back. DecodeMeshSpec: InvalidArgument
// for text that EncodeMeshSpec did not make.
std::string EncodeMeshSpec(const MeshSpec& spec);
absl::StatusOr<MeshSpec> DecodeMeshSpec(absl::string_view text);

// The first field where `mine` (global rank `me`) and `theirs` (global
// rank `them`) differ, as the error every rank returns: InvalidArgument with
// kDisagreementPayload naming `me`:
//   "InitDeviceMesh: the ranks disagree on the mesh: global rank 3 asked
//    for mesh shape (4, 1), global rank 0 for (2, 2); every rank fails with
//    this error"
// OK when they are equal.
absl::Status CompareMeshSpecs(int me, const MeshSpec& mine, int them,
                              const MeshSpec& theirs);

// The agreement of `spec` over every rank of `runtime`'s world (see the top
// of this file). OK on every rank, or the same error on every rank:
//   InvalidArgument   a rank asked for another mesh (CompareMeshSpecs'), or
//                     a rank failed before it could agree (AbandonMesh's
//                     text, prefixed "InitDeviceMesh: global rank R could
//                     not make its mesh: ")
//   DeadlineExceeded  `timeout` passed first: "InitDeviceMesh: N of M ranks
//                     reached the mesh agreement within T (global rank 0
//                     had|had not); the others did not call InitDeviceMesh"
//   others            the store's (a verdict of the failure watch ends the
//                     waits: Unavailable)
absl::Status AgreeOnMesh(MeshRuntime& runtime, int64_t index,
                         const MeshSpec& spec, absl::Duration timeout);

// This rank could not make the mesh of agreement `index`: writes `error` as
// the verdict (unless one is there already), so that the others' AgreeOnMesh
// fails at once, and returns `error` unchanged.
absl::Status AbandonMesh(MeshRuntime& runtime, int64_t index,
                         absl::Status error);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_AGREEMENT_H_
