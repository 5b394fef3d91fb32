// devmesh/comm/shm/shm_setup.h
// -----------------------------------------------------------------------------
// The set-up exchange of a shared-memory group (steps 1-6 of
// shm_communicator.h), run over an existing group of the same members or
// over the store.
// Internal to the shm backend: users call ShareMemory.
#ifndef DEVMESH_COMM_SHM_SHM_SETUP_H_
#define DEVMESH_COMM_SHM_SHM_SETUP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/shm/shm_communicator.h"
#include "comm/shm/shm_process.h"
#include "comm/shm/shm_segment.h"
#include "store/store.h"

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

// What the set-up exchange runs over: an existing group of the same members
// (GroupChannel), or the store alone (StoreChannel). Every member uses the
// same kind, and calls the same steps in the same order.
class SetupChannel {
 public:
  virtual ~SetupChannel() = default;
  virtual int rank() const = 0;
  // By group rank; its length is the group's size.
  virtual const std::vector<int>& global_ranks() const = 0;
  int size() const { return static_cast<int>(global_ranks().size()); }
  // When the set-up must end (its waits outside the channel too: step 6);
  // InfiniteFuture when the channel has no deadline of its own (then
  // ShmOptions::timeout from step 6's start bounds that wait).
  virtual absl::Time deadline() const { return absl::InfiniteFuture(); }
  // Asked about every 100 ms while the set-up waits outside the channel
  // (step 6, for the other members' verdicts): OK to go on waiting; an
  // error ends the set-up with that error's code, the message naming the
  // wait (CommOptions::creation_cancel: a member that died before it
  // checked the segment is then found by the job's verdict, not at the
  // deadline). Default: always OK.
  virtual absl::Status Cancelled() const { return absl::OkStatus(); }
  // Member 0's `bytes` bytes at `data` to every member, in place.
  virtual absl::Status Broadcast(void* data, size_t bytes) = 0;
  // Every member's `bytes` bytes at `mine` into `all` (size() x bytes, in
  // group rank order).
  virtual absl::Status AllGather(const void* mine, void* all,
                                 size_t bytes) = 0;
};

// Over `group`'s own Broadcast and AllGather (uint8). `group` must outlive
// the channel.
std::unique_ptr<SetupChannel> GroupChannel(Communicator& group);

// Over `store`, keys "<prefix>setup/<step>/<rank>": a Broadcast is one Set
// (member 0) or one Get (the others), an AllGather one Set and one MultiGet
// of the other members' records; records travel without their trailing zero
// bytes, so a record of a few words costs a few words. Every wait ends by
// `deadline` (the set-up's step 6 too: deadline()): DeadlineExceeded "shm
// set-up (...): global rank(s) [..] did not join the group", naming the
// members whose record is missing (as the Gloo connect names them). Store errors keep their code, prefixed. Adds
// its round trips to *round_trips (may be null). `store` must outlive the
// channel.
// `cancel` (may be empty) answers the channel's Cancelled().
std::unique_ptr<SetupChannel> StoreChannel(
    Store& store, std::string prefix, int rank, std::vector<int> global_ranks,
    absl::Time deadline, int64_t* round_trips,
    std::function<absl::Status()> cancel = nullptr);

// Collective over `channel`. The segment and identities when every member
// shares memory; std::nullopt when they do not and !options.require.
// Errors: as ShareMemory (the channel's errors for the exchange).
absl::StatusOr<std::optional<ShmSetup>> SetUpSharedMemory(
    SetupChannel& channel, const ShmOptions& options);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_SETUP_H_
