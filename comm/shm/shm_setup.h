// devmesh/comm/shm/shm_setup.h
// -----------------------------------------------------------------------------
// The set-up exchange of a shared-memory group (steps 1-6 of
// shm_communicator.h), run over an existing group of the same members.
// Internal to the shm backend: users call ShareMemory.
#ifndef DEVMESH_COMM_SHM_SHM_SETUP_H_
#define DEVMESH_COMM_SHM_SHM_SETUP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/shm/shm_communicator.h"
#include "comm/shm/shm_process.h"
#include "comm/shm/shm_segment.h"

namespace devmesh {
namespace shm_internal {

struct ShmSetup {
  std::unique_ptr<ShmSegment> segment;  // null for a group of size 1
  std::vector<ProcessIdentity> identities;
  ShmOptions options;  // slot_bytes as used
  // Every member can read every other's memory with process_vm_readv
  // (probed at set-up; DEVMESH_SHM_SINGLE_COPY=0 turns it off): large
  // all-reduces may take the single-copy path (shm_algorithms.h).
  bool single_copy = false;
};

// Collective over `group`. The segment and identities when every member
// shares memory; std::nullopt when they do not and !options.require.
// Errors: as ShareMemory.
absl::StatusOr<std::optional<ShmSetup>> SetUpSharedMemory(
    Communicator& group, const ShmOptions& options);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_SETUP_H_
