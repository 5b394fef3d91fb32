// devmesh/device_mesh/epoch_agreement.h
// -----------------------------------------------------------------------------
// AgreeOnSurvivors (internal to //device_mesh): the store protocol by which
// the live members of an epoch agree on who is dead, for DeviceMesh::Shrink.
// Every member that calls it gets the same answer, or the same error.
//
// Keys, under "devmesh/epoch/<e>/" (FailureWatch::EpochKey):
//   arrive/<r>  set once by member r on arrival: its `payload` (what it
//               knows of its groups; Shrink compares these across a group);
//   decision    set once, by CompareSet, by the first member that sees every
//               member either arrived or dead; its value is everyone's answer:
//               "survivors=<ranks>;dead=<ranks>" followed, for each survivor,
//               by "\n<rank>:<bytes>:<payload>" (so every survivor reads the
//               same payloads), or "error=<code>;<message>".
// A member is dead when the epoch's verdict names it (the watch already saw
// its lease stop or its process gone), when it left (ended its runtime),
// when its process is gone on this host (FailureWatch::ProcessGoneHere), or
// when its lease does not advance for `lease` while it has not arrived and
// this kernel does not show its process running (ProcessRunningHere: a
// rank of an overloaded host is slow, not dead). A live member that has
// not arrived is waited for (its lease advances), up to `timeout`; then the
// decision is the error DeadlineExceeded naming the members still missing.
// A member that arrives after the decision and is not a survivor (it was
// stopped, or slow past its lease) gets FailedPrecondition and is fenced.
//
// Cost: the verdict's read (none once the watch has learnt it) and one
// Set; then one Check of every arrival not yet seen: the last member to
// arrive finds them all and decides after a MultiGet of the survivors'
// payloads and a CompareSet (4 round trips from its arrival); the others
// park on the decision (a Get that returns as soon as a member decides, and
// read everything from it), first for min(10 ms, poll), then, each poll
// (period / 5, at least 5 ms) without a decision, look again: one Check of
// the arrivals not yet seen and, for each member still missing, one Check,
// one Check of its "left" mark and one lease read. (Looking at the missing
// members only after the first park keeps the store free for the last
// member's decision; a second death is then found 10 ms later.)
#ifndef DEVMESH_DEVICE_MESH_EPOCH_AGREEMENT_H_
#define DEVMESH_DEVICE_MESH_EPOCH_AGREEMENT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "device_mesh/failure_watch.h"

namespace devmesh {
namespace device_mesh_internal {

struct Agreement {
  std::vector<int> survivors;          // sorted global ranks
  std::vector<int> dead;               // sorted global ranks
  std::map<int, std::string> payloads;  // survivor -> its arrival payload
};

// Collective over the live `members` (sorted global ranks, this rank among
// them) of `watch`'s `epoch`. Errors: FailedPrecondition when the epoch has
// no verdict (no rank found dead: nothing to shrink; nothing is written);
// the decided error (the same on every member); FailedPrecondition when
// this rank is not a survivor of the
// decision (it is fenced through `watch`); Unavailable when the store does
// not answer; Internal for a decision it cannot parse. An epoch has one
// decision: once decided, an error included, every later call for the
// epoch returns it.
absl::StatusOr<Agreement> AgreeOnSurvivors(FailureWatch& watch, int64_t epoch,
                                           const std::vector<int>& members,
                                           const std::string& payload,
                                           absl::Duration lease,
                                           absl::Duration timeout);

// Whether `decision` (the value of "devmesh/epoch/<e>/decision") lists
// `rank` among the survivors; true for an error decision or one that
// cannot be parsed (it fences nobody).
bool IsSurvivor(absl::string_view decision, int rank);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_EPOCH_AGREEMENT_H_
