// devmesh/device_mesh/root_state.h
// -----------------------------------------------------------------------------
// RootState (internal to //device_mesh): what a root DeviceMesh and every
// mesh derived from it share: the root's layout and options, the group
// cache, and the flattened names (R9). Guarded as its comments say.
#ifndef DEVMESH_DEVICE_MESH_ROOT_STATE_H_
#define DEVMESH_DEVICE_MESH_ROOT_STATE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "device_mesh/group_options.h"
#include "mesh/mesh_layout.h"

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

  // std::mutex rather than absl::Mutex: see mesh_runtime.h.
  // create_mu serializes group creation (a collective over the world, held
  // for up to the group's timeout); mu guards the maps below and is only
  // held briefly, so Abort and look-ups never wait for a creation.
  std::mutex create_mu;
  std::mutex mu;
  // Group cache key (GroupKey) -> this rank's group along such dims, or the
  // error its creation ended with (kept, so that a rank never splits again
  // while the others do not).
  std::map<std::string, absl::StatusOr<std::shared_ptr<Communicator>>> groups;
  // R9: flatten name -> (layout, options) of the flattened mesh.
  std::map<std::string, std::pair<MeshLayout, MeshOptions>> flattened;
};

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_ROOT_STATE_H_
