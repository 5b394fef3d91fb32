// devmesh/device_mesh/spare_registry.h
// -----------------------------------------------------------------------------
// The store protocol of spares and Grow (internal to //device_mesh; see
// DeviceMesh::Grow and DeviceMesh::JoinAsSpare in device_mesh.h).
//
// Keys (every process derives the same):
//   devmesh/epoch/<e>/spares            spares registered in epoch e (Add)
//   devmesh/epoch/<e>/spare/<i>         the global rank of the i-th
//   devmesh/epoch/<e>/grow/<n>/open     the n-th Grow of epoch e was called
//                                       (set by every member on arrival);
//                                       spares park on it and answer
//   devmesh/epoch/<e>/grow/<n>/ready/<r>  spare r's answer: alive and
//                                       waiting
//   devmesh/epoch/<e>/grow/<n>/arrive/<r>  member r's ask in the n-th Grow
//                                       of epoch e (its dim and target,
//                                       then its groups' states)
//   devmesh/epoch/<e>/groups/<r>        the tags of the groups rank r held
//                                       or was making in epoch e, comma-
//                                       separated (MeshRuntime::RecordGroups;
//                                       e > 0): their keys are
//                                       devmesh/group/<tag>/...
//   devmesh/epoch/<e>/grow/<n>/decision the n-th Grow's decision, set once
//                                       (CompareSet) by the member that saw
//                                       every member arrive, or a verdict,
//                                       or the timeout
// Decisions (EncodeGrowDecision): "unchanged;waiting=<ranks>",
// "error=<code>;<disagreeing rank or -1>;<message>", or
// "grown;admitted=<ranks>;waiting=<ranks>;root=<index>;dim=<d>" followed by
// "\n<bytes>:<serialized mesh>" and, per member, "\n<rank>:<bytes>:<ask>".
// A Grow that admits no one leaves the epoch as it is (the next Grow is
// attempt n + 1); one that admits moves the job to epoch e + 1. A Shrink's
// successful decision ("devmesh/epoch/<e>/decision", epoch_agreement.h)
// moves it to e + 1 too.
//
// Old epochs (RetireEpochs). devmesh/job/epoch holds the highest epoch a
// member finished moving into (only raised, CompareSet): where
// FindJobPosition starts. Once the lowest rank of the mesh of epoch x
// finished moving into it, every member of epoch x - 1 had arrived in x - 1's
// agreement (a Shrink's decision needs each member's arrival or its death, a
// Grow that admits every member's arrival), so no member needs the keys of
// epoch x - 2 or earlier: that rank raises devmesh/job/epoch to x, then
// deletes those epochs' keys but two: "death" (the verdict) and "decision"
// (the Shrink's). Those stay for the life of the store: a rank fenced or
// removed there that wakes late reads them (its watch, its Shrink, Explain)
// and gets its FailedPrecondition, not a wait for keys that will never come.
// A spare parked on a retired epoch finds the job again from the pointer.
// The groups' keys go with them: a group recorded in a retired epoch x and
// recorded by no rank in x + 1 (every member of x + 1 records, as it moves
// into it, every group it still holds) is held by no member of the job any
// more, and its devmesh/group/<tag>/ keys are deleted (Store::DeletePrefix;
// a Store subclass that does not override it answers Unimplemented, and then
// every group's keys are kept while the epochs' other keys are deleted).
// A group is recorded where it was made (e > 0), in each epoch its holders
// move into, and by a rank removed alive in the epoch that removed it, so
// those of a replica lost whole are deleted too; epoch 0's are recorded only
// from epoch 1 on (the job's start costs no request): a group of epoch 0
// whose every member died before then keeps its keys. A member of x + 1
// whose record could not be written keeps every group of x (DeleteEpochKeys).
// What a rank that slept through two epochs writes there afterwards (its
// arrival, a spare's registration) is not deleted; no one reads it.
//
// Thread-safety: free functions over a thread-safe Store.
#ifndef DEVMESH_DEVICE_MESH_SPARE_REGISTRY_H_
#define DEVMESH_DEVICE_MESH_SPARE_REGISTRY_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/store.h"

namespace devmesh {
namespace device_mesh_internal {

std::string SpareCountKey(int64_t epoch);
std::string SpareSlotKey(int64_t epoch, int64_t slot);
std::string GrowKey(int64_t epoch, int64_t attempt, absl::string_view what);
// "devmesh/epoch/<epoch>/groups/<rank>" (see above).
std::string GroupRecordKey(int64_t epoch, int rank);
// "devmesh/group/<tag>": the namespace of the group tagged `tag`
// (GroupTag); its creations are under "<it>/<n>/".
std::string GroupKeyPrefix(absl::string_view tag);

struct GrowDecision {
  enum class Kind { kError, kUnchanged, kGrown };
  Kind kind = Kind::kUnchanged;
  absl::Status error;              // kError; its disagreement payload set
  std::vector<int> admitted;       // kGrown: sorted global ranks
  std::vector<int> waiting;        // ready spares left waiting, sorted
  int64_t root_index = -1;         // kGrown: the new root's index
  int replica_dim = 0;             // kGrown: the grown dim
  std::string mesh;                // kGrown: SerializeMesh of the new mesh
  std::map<int, std::string> asks;  // kGrown: member -> its arrival payload
  // kGrown: the host table of the grown job, world rank -> host name (the
  // decider's table with each admitted spare's own host, as it answered
  // the call); every member and admitted spare takes it before making the
  // new groups, so they choose each group's transport alike. Empty when
  // the decider has no host table (a runtime made without a rendezvous).
  std::vector<std::string> hosts;
};

std::string EncodeGrowDecision(const GrowDecision& decision);
// Internal on text that is not a decision.
absl::StatusOr<GrowDecision> DecodeGrowDecision(absl::string_view text);

// Where the job stands, read from the decisions in the store from
// devmesh/job/epoch on: its epoch (the first with neither a successful
// Shrink decision nor a Grow that admitted) and the number of that epoch's
// Grow decisions so far. Starts again from the pointer when the epochs it
// read were retired meanwhile (the pointer passed the epoch it found).
// Cost: one GetIfSet per decision since the pointer, and 2 reads of the
// pointer. Errors: the store's.
struct JobPosition {
  int64_t epoch = 0;
  int64_t attempt = 0;
  bool operator==(const JobPosition& o) const {
    return epoch == o.epoch && attempt == o.attempt;
  }
  bool operator!=(const JobPosition& o) const { return !(*this == o); }
};
absl::StatusOr<JobPosition> FindJobPosition(Store& store);

// Whether `text` (a "devmesh/epoch/<e>/decision") is a successful Shrink's.
bool IsShrinkSuccess(absl::string_view text);

// "devmesh/job/epoch" (see above).
std::string JobEpochKey();
// Its value, 0 when unset. Errors: the store's.
absl::StatusOr<int64_t> ReadJobEpoch(Store& store);

// Deletes `epoch`'s keys but "death" and "decision": the Shrink
// agreement's arrivals (arrive/<r>, r < world_size), every Grow attempt's
// keys (attempts up to the first with neither "open" nor "decision"; the
// "ready" keys of the registered spares), the spares' registry, and the
// groups recorded in `epoch` but in no later epoch up to the job's pointer
// (their whole namespace; the later epochs' records, not only epoch + 1's,
// so that a retirement of epoch + 1 running beside this one and deleting
// its records cannot make a kept group look free) with `epoch`'s records.
// Call it once the job moved past epoch + 1.
// Cost: one request per key, about world_size + (2 + world_size + spares)
// per Grow attempt + the registry's 2 + 2 * spares, + up to 2 * world_size
// reads of the records per epoch read and one DeletePrefix per group no
// longer held. A store whose DeletePrefix is Store's default
// (Unimplemented) keeps the groups' keys; that is no error. Records are
// best effort (a rank's Set may fail): no group is deleted when a rank that
// arrived in the agreement ending epoch + 1 (its Shrink's, or its first
// Grow attempt's) has no record there, or when epoch + 1 has no record at
// all and is not retired (the pointer below epoch + 3): keys kept, the safe
// side. Up to 2 * world_size more Checks for that.
// Errors: the store's (keys after the first failure are left).
absl::Status DeleteEpochKeys(Store& store, int64_t epoch, int world_size);

// Epochs first..last (none when first > last).
struct EpochRange {
  int64_t first = 0;
  int64_t last = -1;
};

// Raises devmesh/job/epoch to `epoch` (CompareSet; a pointer at or past it
// is left). Returns the epochs this raise retires: from the one after those
// the previous raise retired (pointer - 1, or 0 when unset) to epoch - 2;
// none when the pointer was at or past `epoch` already. Raises race
// safely: the ranges of the raises that win are disjoint and together
// cover 0..pointer - 2. Errors: the store's; Internal when the pointer
// holds no epoch.
absl::StatusOr<EpochRange> RaiseJobEpoch(Store& store, int64_t epoch);

// Called by the lowest rank of the mesh of `epoch` once it finished moving
// into it (Shrink, Grow): RaiseJobEpoch now (2 to 4 round trips), then
// DeleteEpochKeys on each epoch it retires, on a detached thread that holds
// `store`, so that the caller's Shrink or Grow does not wait for
// O(world_size) deletes. Best effort: the job goes on whatever the store
// answers; keys left by a failure (or a process that exits first) stay.
void RetireEpochs(std::shared_ptr<Store> store, int64_t epoch, int world_size);

// Adds `rank` to `epoch`'s spares (2 round trips). Errors: the store's.
absl::Status RegisterSpare(Store& store, int64_t epoch, int rank);

// The ranks registered as spares in `epoch`, sorted, each once. A slot
// counted but not yet written is skipped. Errors: the store's.
absl::StatusOr<std::vector<int>> RegisteredSpares(Store& store, int64_t epoch);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_SPARE_REGISTRY_H_
