// devmesh/comm/shm/shm_process.h
// -----------------------------------------------------------------------------
// Process identity and liveness for the shared-memory backend: a member is
// (pid, start time), the start time being field 22 of /proc/<pid>/stat (clock
// ticks since boot), so that a pid reused by a later process never counts as
// the member. Set-up checks that every member sees every other member's
// identity under /proc (one pid namespace); only then is liveness by pid
// meaningful, and only then is a group shared memory.
//
// Thread-safety: pure reads of /proc; any thread.
#ifndef DEVMESH_COMM_SHM_SHM_PROCESS_H_
#define DEVMESH_COMM_SHM_SHM_PROCESS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>

#include "absl/status/statusor.h"

namespace devmesh {
namespace shm_internal {

struct ProcessIdentity {
  int64_t pid = 0;
  uint64_t start_time = 0;
};

// This process. Errors: Internal when /proc/self/stat cannot be read.
absl::StatusOr<ProcessIdentity> SelfIdentity();

enum class Liveness {
  kAlive,
  kDead,      // gone, a zombie, or its pid now names another process
  kUnknown,   // /proc could not be read for another reason
};

// Whether the process `id` still runs. A zombie (killed, not yet reaped by
// its parent) counts as dead.
Liveness CheckLiveness(const ProcessIdentity& id);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_PROCESS_H_
