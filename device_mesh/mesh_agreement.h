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
//   rank 0:        Set "spec" (its MeshSpec, encoded), Wait for every other
//                  rank's "agreed/<rank>", then CompareSet "verdict" to OK
//                  (reading back a failure written first);
//   every other:   Get "spec"; if it equals its own, Set "agreed/<rank>" and
//                  Get "verdict"; else CompareSet "verdict" to the mismatch,
//                  naming both ranks' values, and then Set its mark.
// Each rank writes a key of its own: no counter that every rank adds to (a
// contended compare-and-swap over etcd). The first verdict written is every
// rank's. O(1) round trips (3 on every rank) and O(spec) bytes per rank
// (rank 0's Wait names world - 1 keys); the waits are the creation
// store's (MeshRuntime::CreationStore: ended by the failure watch's
// verdict) and end by the timeout. A rank that failed before it could
// agree (its own checks) writes its error as the verdict, then its mark
// (AbandonMesh), so the others fail at once with it too.
//
// The roots made by DeviceMesh::Create, FromLayout and Deserialize agree
// the same way among the root's ranks only (AgreeOnRoot), under
// "root_agreement/<root index>/", the lowest member in rank 0's part.
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
#include "mesh/mesh_layout.h"
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

// The spec of a root mesh made by DeviceMesh::Create, FromLayout or
// Deserialize: InitDeviceMeshSpec's fields for `layout`'s shape and names,
// with the root's ranks in row-major order after the shape (listed up to 64
// ranks, a 64-bit FNV-1a of them beyond, so its size stays bounded).
MeshSpec RootMeshSpec(absl::string_view device_type, const MeshLayout& layout,
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
// The same, with the operation's name (`what`: "DeviceMesh::Create") and who
// fails (`who`: "every rank of the mesh") in the text.
absl::Status CompareMeshSpecs(int me, const MeshSpec& mine, int them,
                              const MeshSpec& theirs, absl::string_view what,
                              absl::string_view who);

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

// The agreement of a root mesh made by DeviceMesh::Create, FromLayout or
// Deserialize (`what` names it in errors), among the root's `members`
// (global ranks, any order) only, under "root_agreement/<root_index>/":
// the same protocol with the lowest member in rank 0's part. Ranks outside
// the root, a root of one rank, a detached runtime or one that skips mesh
// agreements: OK with no communication. Every member gets OK or the same
// error, as AgreeOnMesh's, with `what` for "InitDeviceMesh" and "every rank
// of the mesh" as who fails. Costs O(1) round trips per member and the
// spec's bytes (RootMeshSpec: bounded).
absl::Status AgreeOnRoot(MeshRuntime& runtime, int64_t root_index,
                         std::vector<int> members, const MeshSpec& spec,
                         absl::string_view what, absl::Duration timeout);

// This rank could not make the root mesh `root_index` (its own checks
// failed): writes `error`, prefixed "<what>: global rank R could not make
// its mesh: ", as the root agreement's verdict (unless one is there), and,
// when this rank is the root's lowest member (`leader`), the marker that
// sends the others to it; returns `error` unchanged. Nothing is written on
// a runtime that skips mesh agreements.
absl::Status AbandonRoot(MeshRuntime& runtime, int64_t root_index,
                         bool leader, absl::string_view what,
                         absl::Status error);

// This rank could not make the mesh of agreement `index`: writes `error` as
// the verdict (unless one is there already), so that the others' AgreeOnMesh
// fails at once, and returns `error` unchanged.
absl::Status AbandonMesh(MeshRuntime& runtime, int64_t index,
                         absl::Status error);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_AGREEMENT_H_
