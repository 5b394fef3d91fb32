// devmesh/comm/two_level/two_level_levels.h
// -----------------------------------------------------------------------------
// The levels of a two-level group (two_level_communicator.h), made from its
// flat group alone, with no store round trip: what the group's first
// all-reduce does before its steps.
//
// Every member of the flat group calls MakeTwoLevelLevels with the same
// plan layout, in the same place among its flat calls; the steps, each a
// call on the flat group (bounded by its timeout):
//   1. "intra-host shm set-up": the shared-memory set-up of this host's
//      members (comm/shm/shm_setup.h, steps 1-6), its broadcast and
//      all-gather carried by two all-gathers on the flat group (every host's
//      set-up at once; each member keeps its host's records). Step 6 meets
//      in the segment, bounded by the flat group's timeout and ended by
//      `cancelled`;
//   2. "levels verdict": a 1-byte all-gather on the flat group of whether
//      each member's host shares memory, so that every member decides alike;
//   3. "inter-host split": flat.Split(local index, host), the members with
//      this member's local index in host order (ucx: an all-gather on the
//      flat group; gloo: through the store, comm/gloo).
// A host whose members cannot share one segment (two containers with one
// host name) makes every member keep the flat group only (Levels with null
// members), never an error.
//
// Errors: the flat group's (its codes and payloads: DeadlineExceeded naming
// the late members, Unavailable with kPeerPayload naming a member whose
// process is gone, InvalidArgument with kDisagreementPayload where members'
// calls differ, FailedPrecondition after Abort), or the shm set-up's step 6
// (Unavailable with kProcessGonePayload, DeadlineExceeded), or
// `cancelled`'s; `*step` names the step that failed.
//
// Thread-safety: one call per flat group at a time; `cancelled` is asked
// from the calling thread.
#ifndef DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_LEVELS_H_
#define DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_LEVELS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "comm/two_level/two_level_plan.h"
#include "config/require_cxx17.h"
#include "store/store.h"

namespace devmesh {
namespace two_level_internal {

struct TwoLevelLevels {
  // Both null: some host cannot share memory; the group stays flat.
  std::shared_ptr<Communicator> intra;  // "shm", group rank = local index
  std::shared_ptr<Communicator> inter;  // flat's backend, group rank = host
};

// Makes this member's levels over `flat` (this member's rank in it is
// `plan`'s). `options` are the two-level group's (label, timeout);
// `store` is kept by the intra group for Send/Recv/Split it never uses
// in a two-level group (keys under "intra/<host>/"), never called here.
absl::StatusOr<TwoLevelLevels> MakeTwoLevelLevels(
    Communicator& flat, const TwoLevelPlan& plan, const CommOptions& options,
    std::shared_ptr<Store> store, std::function<absl::Status()> cancelled,
    std::string* step);

}  // namespace two_level_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_LEVELS_H_
