// devmesh/comm/shm/shm_links.h
// -----------------------------------------------------------------------------
// Send and Recv of a shared-memory group made over the store alone (no
// cross-host group underneath; CreateShmGroup): a two-member group of the
// cross-host backend per peer (through the registry, comm/registry.h: the
// backend DEVMESH_CROSS_HOST_BACKEND names when the links are made, "ucx" by
// default; config/settings.h), connected on the first Send or Recv between
// the two (both call, so both connect) under store keys that name the pair,
// "<prefix>p2p/<lo>/<hi>/". A group that never sends point to point makes no
// pair. Internal to the shm backend.
#ifndef DEVMESH_COMM_SHM_SHM_LINKS_H_
#define DEVMESH_COMM_SHM_SHM_LINKS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "sync/annotated_mutex.h"
#include "store/store.h"

namespace devmesh {
namespace shm_internal {

class ShmLinks {
 public:
  // `options` as the group's (timeout, address choice, creation_cancel); its global_ranks are ignored. `group_open` says
  // whether the group is still usable (the shm group's CheckOpen: aborted
  // by a member, a member found dead); it must stay valid while a Send or
  // Recv runs.
  ShmLinks(std::shared_ptr<Store> store, std::string prefix, int rank,
           std::vector<int> global_ranks, CommOptions options,
           std::function<absl::Status()> group_open);
  ~ShmLinks();

  // As Communicator::Send / Recv, `peer` a group rank. The first call with
  // a peer connects the pair through the store (which must still serve: a
  // store hosted by a rank that has gone makes it Unavailable), bounded by
  // the group's timeout: DeadlineExceeded naming the peer when it does not
  // make the matching call in time. It ends sooner when this group is
  // aborted by any member or a member is found dead (its store waits are
  // cut into 100 ms slices that ask `group_open` and creation_cancel, and
  // the pair's creation asks them every 100 ms). A failed connection is
  // kept: every later call with that peer returns the same error; NotFound
  // when the cross-host backend is not linked into this program
  // (CreateCommunicator's). An empty message (count 0) returns OK without a
  // pair. InvalidArgument
  // "shm send: peer P is outside [0, size)" / "... is this rank";
  // FailedPrecondition after Abort.
  absl::Status Send(const void* buf, size_t count, DataType dtype, int peer);
  absl::Status Recv(void* buf, size_t count, DataType dtype, int peer);

  // Aborts every pair made and every later one (a pair being connected
  // stops within a slice, 100 ms). Safe from any thread.
  void Abort();

  // The pairs connected so far (tests). Thread-safe.
  int connected() const;

 private:
  // The pair with `peer` (connected now if need be); nullptr for an empty
  // message, which needs none.
  absl::StatusOr<Communicator*> Link(int peer, size_t count,
                                     absl::string_view what);

  const std::shared_ptr<Store> store_;
  const std::string prefix_;
  const int rank_;
  const std::vector<int> global_ranks_;
  // The pairs' backend (config/settings.h's CrossHostBackendName).
  const std::string backend_;
  CommOptions options_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  // Not absl::Mutex: Debian's Abseil is not built for TSan
  // (sync/annotated_mutex.h).
  mutable sync_internal::Mutex mu_;
  std::map<int, absl::StatusOr<std::unique_ptr<Communicator>>> links_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_LINKS_H_
