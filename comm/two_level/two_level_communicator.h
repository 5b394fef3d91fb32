// devmesh/comm/two_level/two_level_communicator.h
// -----------------------------------------------------------------------------
// A CPU group that crosses hosts with several members on each host, made of
// three groups of its members (two_level_plan.h):
//   - flat: every member, on the cross-host backend ("ucx" or "gloo"); the
//     only group made at creation, as a flat group of these members would
//     be (under "<store>flat/": 2 store round trips over UCX);
//   - intra: this host's members, shared memory ("shm");
//   - inter: the members with this member's local index, one per host, on
//     the cross-host backend.
// The intra and inter groups (the levels) are made by the group's first
// all-reduce (of count > 0), from the flat group alone, no store round trip
// (two_level_levels.h: the shm set-up over all-gathers on the flat group,
// a 1-byte verdict all-gather, flat.Split(local index, host); over UCX four
// all-gathers on the flat group, over Gloo the Split goes through the
// store). Where some host's members cannot share one segment (two
// containers with one host name), every member keeps the flat group for
// all-reduces too (TwoLevelPathOf: kFlat), no error.
//
// AllReduce (and Reduce, which the front composes from it) runs on the two
// levels, in pieces of kTwoLevelPieceBytes:
//   - from kTwoLevelShardMinBytes and count >= L: intra reduce-scatter,
//     an all-reduce of each member's shard with its inter group (the L inter
//     groups at once, so every member carries cross-host traffic), intra
//     all-gather. A count not divisible by L leaves a tail of count % L
//     elements that the last local index carries with its shard (an intra
//     reduce to it before, an intra broadcast from it after);
//   - below: intra reduce to local index 0, all-reduce of the host leaders
//     (the inter group of local index 0), intra broadcast.
// avg runs as sum and divides once at the end; every member gets the same
// bits. Every other collective, Send, Recv and Split go to the flat group
// (a Split's children are flat groups of the cross-host backend); once the
// levels exist, each other collective, and an all-reduce of more than one
// piece, first compares the whole call's record (48 bytes) across every
// member: an all-gather of the records on the intra-host group (a few
// microseconds in shared memory), then on the inter-host group (one
// cross-host round trip), so that every collective's first step is on the
// intra group and whole hosts meet on the inter group (the per-call check
// below). Before the levels exist, every collective's first step is on the
// flat group (the first all-reduce's is the levels' making), whose own
// per-call check compares them.
//
// Errors: the levels' (comm/shm/shm_communicator.h,
// comm/ucx/ucx_communicator.h), their codes and payloads kept, the message
// prefixed "two_level <op> (<level> <step>): "; a failure of the levels'
// making is the first all-reduce's, "two_level allreduce (making the levels,
// <step>): " with the flat group's or the shm set-up's code and payloads. A
// member that died is named (global rank, kProcessGonePayload or
// kPeerPayload) by the members that share a level with it (during the
// levels' making, by those that wait for its messages on the flat group); a
// member whose call failed tears its levels down, so its other peers fail at
// once naming it (Unavailable with kPeerPayload or kPeerLeftPayload). The
// per-call check is each level's: members whose all-reduces differ in
// count, dtype or op get InvalidArgument with kDisagreementPayload; so do
// the members of a host where one runs an all-reduce and another a
// different collective (both start on the intra-host group, or before the
// levels exist on the flat group), and the other members then fail at once
// as their peers tear their levels down. Hosts that each agree inside but
// differ from each other (every member of one host in an all-reduce, every
// member of another in an all-gather; totals whose first pieces are alike)
// meet on the inter group (before the levels exist, on the flat group),
// whose check (the UCX backend's, or the record comparison above) fails its
// members with InvalidArgument and kDisagreementPayload; the others fail at
// once as those tear their levels down.
// After any error the group refuses every later call with it; after Abort,
// FailedPrecondition.
//
// Shrink: not offered (not a ShrinkableCommunicator); DeviceMesh::Shrink
// makes the group anew, two-level again when the survivors' layout allows.
//
// Abort (any thread) also ends the levels' making: the flat group's calls
// end, the shm set-up's wait for its host's verdicts asks about every 100
// ms, and levels made as it lands are aborted.
//
// Thread-safety: one call at a time; Abort from any thread.
#ifndef DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_COMMUNICATOR_H_
#define DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "store/store.h"

namespace devmesh {

// All-reduces of at least this many bytes (and at least L elements) take
// the reduce-scatter path; smaller ones go through the host leaders.
inline constexpr size_t kTwoLevelShardMinBytes = 64 * 1024;
// Larger all-reduces run in pieces of this many bytes (the last one
// smaller, on the path its size picks), each through its steps in turn.
inline constexpr size_t kTwoLevelPieceBytes = 4 * 1024 * 1024;

// The all-reduce's bounds (every member passes the same).
struct TwoLevelOptions {
  size_t shard_min_bytes = kTwoLevelShardMinBytes;
  size_t piece_bytes = kTwoLevelPieceBytes;  // > 0
};

// What a two-level group's all-reduces run on so far.
enum class TwoLevelPath {
  kNotMade,    // before its first all-reduce: only the flat group exists
  kTwoLevels,  // the first all-reduce made the intra and inter groups
  kFlat,       // some host's members could not share memory: flat only
};

// `comm`'s path when it is a group made by CreateTwoLevelCommunicator,
// else nullopt (another backend, or a wrapper around one). Thread-safety:
// from the thread that makes `comm`'s calls.
std::optional<TwoLevelPath> TwoLevelPathOf(const Communicator& comm);

// Makes rank `rank` of a `size`-member two-level group over `store`;
// `host_keys` holds one host key per group rank (two_level_plan.h) and must
// be two-level; `cross_backend` names the inter and flat groups' backend
// ("ucx" or "gloo"). Every member calls it with the same host_keys and
// cross_backend.
// Errors:
//   InvalidArgument  the checks of comm/group_args.h; host_keys of another
//                    length than size, or a layout that is not two-level;
//                    piece_bytes 0
//   others           the flat group's creation error, prefixed
//                    "two_level creation (flat): "
absl::StatusOr<std::unique_ptr<Communicator>> CreateTwoLevelCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options, absl::Span<const std::string> host_keys,
    absl::string_view cross_backend,
    const TwoLevelOptions& two_level = TwoLevelOptions());

}  // namespace devmesh

#endif  // DEVMESH_COMM_TWO_LEVEL_TWO_LEVEL_COMMUNICATOR_H_
