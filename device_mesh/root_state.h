// devmesh/device_mesh/root_state.h
// -----------------------------------------------------------------------------
// RootState (internal to //device_mesh): what a root DeviceMesh and every
// mesh derived from it share: the root's layout and options, the group
// cache, and the flattened names (R9). Guarded as its comments say.
#ifndef DEVMESH_DEVICE_MESH_ROOT_STATE_H_
#define DEVMESH_DEVICE_MESH_ROOT_STATE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "device_mesh/group_options.h"
#include "mesh/mesh_layout.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace device_mesh_internal {

// A group's timeout when no option sets one.
inline constexpr absl::Duration kDefaultGroupTimeout = absl::Seconds(300);


// What the root mesh and every mesh derived from it share.
struct RootState {
  RootState(MeshLayout layout, MeshOptions opts)
      : root_layout(std::move(layout)), root_options(std::move(opts)) {}

  const MeshLayout root_layout;
  const MeshOptions root_options;

  // This root's index on its runtime (MeshRuntime::NextRootIndex; -1 on a
  // detached runtime): part of every group's identity. Set once by
  // DeviceMesh::MakeRoot before the root is shared.
  int64_t root_index = -1;
  // The job epoch this root belongs to (FailureWatch::epoch): 0, or the
  // epoch of the DeviceMesh::Shrink that made it. Part of every group's
  // identity from epoch 1 on, so no key or connection of an old epoch is
  // reused. Set once before the root is shared.
  int64_t epoch = 0;
  // DeviceMesh::Grow calls on this root that admitted no one (the epoch
  // stays): the next Grow's attempt number in the epoch, the same on every
  // member (they call Grow alike).
  std::atomic<int64_t> grow_attempts{0};

  // mu guards the maps below and `creating`, and is only held briefly, so
  // Abort and look-ups never wait for a creation. A group is created by one
  // thread at a time (its key in `creating` meanwhile; a second thread
  // asking for it waits on `created`); distinct groups may be created at
  // once from distinct threads (each a collective over its own members
  // only, MeshRuntime::Group is thread-safe).
  sync_internal::Mutex mu;
  sync_internal::CondVar created;
  std::set<std::string> creating ABSL_GUARDED_BY(mu);
  // Group cache key (GroupKey) -> this rank's group along such dims, or the
  // error its creation ended with (kept, so that a rank never creates it
  // again while the others do not).
  std::map<std::string, absl::StatusOr<std::shared_ptr<Communicator>>> groups
      ABSL_GUARDED_BY(mu);
  // Group cache key -> the process-local NCCL fields (stream, synchronize,
  // CUDA device) its group was made with: a later request for the same
  // group with others is an InvalidArgument, not a second group that its
  // peers would never create.
  std::map<std::string, std::string> group_locals ABSL_GUARDED_BY(mu);
  // R9: flatten name -> (layout, options) of the flattened mesh.
  std::map<std::string, std::pair<MeshLayout, MeshOptions>> flattened
      ABSL_GUARDED_BY(mu);
};

// The process-local fields of `options`' typed backend options as text,
// "nccl options stream=0, synchronize=1, cuda_device=-1" ("" when none is
// set): the value of RootState::group_locals.
std::string LocalFields(const GroupOptions& options);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_ROOT_STATE_H_
