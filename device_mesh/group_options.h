// devmesh/device_mesh/group_options.h
// -----------------------------------------------------------------------------
// Options of the process groups a DeviceMesh creates: which backend, and the
// timeout of every blocking step. One GroupOptions for the whole mesh, and
// overrides per dim name; both are carried by every slice, flatten,
// unflatten and concatenation of the mesh (R19, PyTorch's backend_override).
// R-numbers name behaviours listed in docs/BEHAVIOURS.md.
// Plain value types: copy freely.
#ifndef DEVMESH_DEVICE_MESH_GROUP_OPTIONS_H_
#define DEVMESH_DEVICE_MESH_GROUP_OPTIONS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/options.h"

namespace devmesh {

struct GroupOptions {
  // The group's transport:
  //  - "auto": shared memory ("shm") for a group whose members all map one
  //    segment (checked when the group is made: comm/shm/shm_communicator.h),
  //    else the cross-host backend (DEVMESH_CROSS_HOST_BACKEND: "ucx" by
  //    default). The CPU default.
  //  - "shm": shared memory, or FailedPrecondition naming a member that
  //    cannot share it (another host, another /dev/shm or pid namespace).
  //  - "ucx": UCX, always.
  //  - "gloo": Gloo over TCP, always; opt-in: the program must link
  //    @devmesh//comm:gloo (else InitDeviceMesh is NotFound naming it).
  //  - "nccl": NCCL (the "cuda" default).
  //  - empty: the device type's default ("cpu" -> "auto", "cuda" -> "nccl").
  // Communicator::backend() of a group says which it got ("shm", "ucx" or
  // "gloo" for "auto").
  std::string backend;
  // Bound on group creation and on every collective of the group. Unset:
  // the mesh-wide value, else 300 s (PyTorch's default process-group
  // timeout is 30 min for NCCL; devmesh errs shorter).
  std::optional<absl::Duration> timeout;
  // The dim's NCCL config: the ncclConfig_t fields (blocking, split_share,
  // CTAs, cga_cluster_size, net_name), which every member must give alike,
  // and this process's own cuda_device, stream and synchronize, which reach
  // the group too (collectives on the caller's stream; synchronize = false
  // returns once enqueued). Unset: NCCL's defaults on a stream of the
  // group's own. A dim that sets it is always a group of its own made with
  // it, never the world communicator; asking a root for the same group
  // (same ranks and shared fields) with another stream, synchronize or
  // device is InvalidArgument (one group has one stream). Backends other
  // than NCCL ignore it. Serialize keeps the shared fields only (a stream
  // is a pointer of this process): a deserialized mesh's groups use their
  // own stream with synchronize on. devmesh's own: PyTorch passes
  // pg_options to split_group.
  std::optional<NcclOptions> nccl;
  // Check every collective across the group's members before it runs, as
  // the shared-memory backend always does (kind, dtype, count, op, root and
  // the call's number; a mismatch is InvalidArgument on every member and
  // the group refuses later calls): over a second, CPU group of the same
  // members (comm/verified_communicator.h; shared memory inside a host,
  // UCX across hosts), one 48-byte all-gather per collective. For NCCL the check runs on the CPU before the collective is
  // enqueued. Unset: on for Gloo groups (backend "gloo", or "auto" across
  // hosts with DEVMESH_CROSS_HOST_BACKEND=gloo: Gloo does not compare calls
  // itself; false turns it off), off for the others (NCCL: a debugging
  // mode; "shm" and "ucx" check every call in-band already: true adds the
  // all-gather to "ucx" groups, "shm" groups ignore it). A verified group
  // is never the world communicator. Part of the group's identity, of
  // InitDeviceMesh's agreement and of a serialized mesh (so a Deserialize'd
  // mesh, and a spare admitted by Grow, verify as the original's members
  // do). A verified NCCL group is not revoked on a death
  // verdict nor shrunk by DeviceMesh::Shrink (ncclCommShrink): it is
  // aborted and made anew.
  std::optional<bool> verify_calls;
};

struct MeshOptions {
  // Applies to every dim.
  GroupOptions all;
  // Per dim name (or "dim_<i>", R3); a field set here wins over `all`.
  // Checked when the mesh is made (ValidateMeshOptions).
  absl::flat_hash_map<std::string, GroupOptions> per_dim;
  // Dims (by name) that InitDeviceMesh must keep inside one host: every line
  // of ranks along each of them on a single host (device_mesh/host_layout.h).
  // Checked once by InitDeviceMesh, which returns FailedPrecondition naming
  // the dim and the two hosts of a crossing line, NotFound for a name that
  // is not a dim. Not carried to slices and not serialized (a check, not a
  // property of groups).
  std::vector<std::string> require_inside_host;

  // The effective options of the dim whose group name is `dim_group_name`.
  GroupOptions For(absl::string_view dim_group_name) const;
};

// Checks `options` against a mesh whose dims have the group names
// `dim_group_names` (R3: the dim names, else "dim_<i>") and returns them
// with every per_dim key given as its dim's group name (a "dim_<i>" key of a
// named mesh becomes the dim's name). Keys of `extra_names` (flattened
// names of the root) are accepted as they are. InvalidArgument naming the
// key (devmesh's own: PyTorch's backend_override raises for an unknown
// name, devmesh also for the rest): a key that is neither a dim name,
// "dim_<i>" with i in [0, ndim), nor an extra name; "dim_<i>" with i out of
// range; two keys for one dim ("dp" and "dim_0"); a timeout (of `all` or of
// a key) that is not positive. O(keys * ndim).
absl::StatusOr<MeshOptions> ValidateMeshOptions(
    MeshOptions options, const std::vector<std::string>& dim_group_names,
    const std::vector<std::string>& extra_names = {});

// The text form of `g`, for error messages and for comparing two options:
// "{backend=gloo, timeout=25s, nccl=unset}"; an unset backend or timeout
// reads "unset"; a set nccl lists the ncclConfig_t fields a dim's group
// is made with ("nccl={blocking=1, split_share=0, cga_cluster_size=-1, min_ctas=-1,
// max_ctas=-1, net_name=''}"); cuda_device, stream and synchronize are left
// out (process-local, see GroupOptions::nccl).
std::string GroupOptionsString(const GroupOptions& g);

// Whether `a` and `b` name the same group on every member: equal
// GroupOptionsString (the process-local NCCL fields are not compared;
// GetGroup checks them against the group's).
bool SameGroupOptions(const GroupOptions& a, const GroupOptions& b);

// InvalidArgument when `g.timeout` is set and not positive, naming `where`.
absl::Status CheckGroupTimeout(const GroupOptions& g, absl::string_view where);

// The backend a device type means when no override is given: "cpu" ->
// "auto", "cuda" -> "nccl" (the backend that registers itself as its
// default), anything else -> "" (the caller must override).
// comm/auto_group.h's DefaultGroupBackendFor.
std::string DefaultBackendFor(absl::string_view device_type);

// R18: a device type is a non-empty word of letters without an index
// ("cuda", not "cuda:0"). InvalidArgument naming it otherwise.
absl::Status CheckDeviceType(absl::string_view device_type);

// CheckDeviceType, and then InvalidArgument listing the device types devmesh
// knows ("cpu", "cuda"; with a hint for "CPU" or "gpu") when `device_type`
// has no default backend and `options` give none for some dim: neither
// options.all.backend nor a per_dim backend for each of the `ndim` dims
// named `dim_names` (R19: an override makes any device type usable).
absl::Status CheckDeviceTypeHasBackend(absl::string_view device_type,
                                       const MeshOptions& options,
                                       absl::Span<const std::string> dim_names,
                                       int ndim);

namespace device_mesh_internal {

// One typed backend-options member of GroupOptions, as the CommOptions its
// backend's registered codec reads (comm/backend_options.h).
struct TypedBackendOptions {
  std::string backend;  // the backend whose codec reads `options`
  bool set = false;     // the GroupOptions member is set
  CommOptions options;  // holds the member's value when set
};

// Every typed backend-options member of `g`, set or not, in a fixed order
// (the order of mesh serialization: a new member goes at the end): today
// one, GroupOptions::nccl, read by the backend whose codec reads
// NcclOptions (comm/registry.h's BackendReadingOptions: "nccl").
// group_options.cc lists GroupOptions' typed members once (for this,
// SetTypedOptions, TypedCommOptions and MergeTypedOptions); their backends
// come from the registry by type, and the group identity, option strings,
// local fields and serialization go through the codecs by name.
std::vector<TypedBackendOptions> TypedOptionsOf(const GroupOptions& g);

// Sets the member of `g` that `backend`'s typed options fill, from
// `options`. Errors: InvalidArgument when GroupOptions has no member read
// by `backend` ("GroupOptions has no options of backend \"x\"").
absl::Status SetTypedOptions(absl::string_view backend,
                             const CommOptions& options, GroupOptions* g);

// `g`'s set typed backend-options members in one CommOptions, each in its
// own member (GroupOptions::nccl in CommOptions::nccl; every other field
// default); nullopt when none is set. What MeshRuntime::Group takes.
std::optional<CommOptions> TypedCommOptions(const GroupOptions& g);

// Sets each typed backend-options member of `into` that `from` sets to
// `from`'s (a per-dim override over the mesh-wide options).
void MergeTypedOptions(const GroupOptions& from, GroupOptions* into);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_GROUP_OPTIONS_H_
