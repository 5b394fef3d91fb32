// devmesh/device_mesh/host_layout.h
// -----------------------------------------------------------------------------
// Host-aware layout: which mesh dims stay inside one host and which cross
// hosts. A dim stays inside a host when, for EVERY line of ranks along it
// (every group of the dim), all the line's ranks run on the same host; one
// line spread over two hosts makes the dim cross hosts. This is the question
// JAX's hybrid meshes (mesh_utils.create_hybrid_device_mesh: ici dims inside
// a slice, dcn dims across) and MPI's `reorder` argument of MPI_Cart_create
// answer: put the bandwidth-hungry dim (tp) on the fast links inside a host.
// (R3 below names a behaviour listed in docs/BEHAVIOURS.md.)
//
//   // rank r on host hosts[r]; 2 x 2 over 2 hosts, host-major (ranks 0,1 on h0)
//   auto spans = DimHostSpans(layout_dp_tp, {"h0", "h0", "h1", "h1"});
//   // spans[0]: dp crosses ("line 0,2 crosses hosts 'h0' (rank 0) and 'h1'
//   //           (rank 2)"); spans[1]: tp inside a host.
//
// Hosts come from the rendezvous (each rank's gethostname, exchanged once
// through the store at start-up; MeshRuntime::hostnames()).
//
// Errors: InvalidArgument when a rank of the layout has no entry in
// `host_of_rank` (index past its end) or an empty host name; NotFound for a
// dim name the layout does not have; FailedPrecondition when the mesh's
// runtime does not know the hosts (a runtime made without a Bootstrap, or a
// detached one) and, from CheckDimsInsideHost, when a required dim crosses.
// Cost: O(numel x ndim) time (every rank of the layout is looked at once per
// dim), O(numel) memory; only on request, never on a hot path.
// Thread-safety: pure functions of their arguments.
#ifndef DEVMESH_DEVICE_MESH_HOST_LAYOUT_H_
#define DEVMESH_DEVICE_MESH_HOST_LAYOUT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "device_mesh/device_mesh.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

// Where one dim's lines lie.
struct DimHostSpan {
  std::string dim;           // the dim's name, or "dim_<i>" when unnamed (R3)
  bool inside_host = true;   // every line of the dim is on one host
  // When !inside_host, the first crossing line (in rank order of its first
  // member) and two of its ranks on different hosts: its first member and
  // the first member on another host.
  std::vector<int64_t> line;
  int64_t rank_a = -1;
  int64_t rank_b = -1;
  std::string host_a;
  std::string host_b;

  // "inside one host", or "line 0,2 crosses hosts 'h0' (rank 0) and 'h1'
  // (rank 2)".
  std::string ToString() const;
};

// One entry per dim of `layout`, in dim order. `host_of_rank[r]` is the host
// of world rank r (every rank of the layout must have one).
absl::StatusOr<std::vector<DimHostSpan>> DimHostSpans(
    const MeshLayout& layout, absl::Span<const std::string> host_of_rank);

// The same for a mesh, with its runtime's hosts (MeshRuntime::hostnames()).
absl::StatusOr<std::vector<DimHostSpan>> DimHostSpans(const DeviceMesh& mesh);

// OK when every dim named in `dims` stays inside one host; else
// FailedPrecondition naming the first such dim, the line and its two hosts:
// "dim 'tp' must stay inside one host (MeshOptions.require_inside_host) but
// its line 0,2 crosses hosts 'h0' (rank 0) and 'h1' (rank 2)". NotFound for a
// name that is not a dim of `layout`; other errors as DimHostSpans.
absl::Status CheckDimsInsideHost(const MeshLayout& layout,
                                 absl::Span<const std::string> host_of_rank,
                                 absl::Span<const std::string> dims);

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_HOST_LAYOUT_H_
