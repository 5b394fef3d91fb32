// devmesh/comm/ucx/ucx_communicator.h
// -----------------------------------------------------------------------------
// The UCX backend of Communicator ("ucx"): CPU groups whose members need not
// share memory (members on several hosts). Messages go through the process's
// UCX worker (ucx_worker.h) as tag-matched sends and receives
// (ucx_group.h: endpoints made on first use, no listening socket per pair);
// the collectives are devmesh's own algorithms over them
// (comm/algorithms/p2p_collectives.h).
//
// Creation, every member: publishes "ucx/<rank>" (its worker's address and
// a random word) under the group's store and reads every member's (2 round
// trips, one MultiGet); the group's tag id is a hash of the members' words.
// Split runs over the parent group (an all-gather of (color, key)), no store.
//
// Semantics: comm/communicator.h, as the other CPU backends (every dtype and
// op; avg = sum, then divide by size(); every member gets the same bits).
// Every message carries the sender's call (kind, dtype, count, op, root,
// sequence number) and the receiver checks it before it uses the data
// (ucx_group.h): members whose calls differ get InvalidArgument with
// kDisagreementPayload, never an OK with wrong data. A member that received
// nothing from the one that differs may complete that call (a broadcast's
// root, or both members of a 2-member broadcast whose roots differ); it
// fails at its next call. A collective of count 0 sends nothing and is not
// checked. After an error the receive buffers' contents are unspecified.
//
// Errors (beyond the front's, comm/communicator.h):
//   InvalidArgument     bad rank/size/options at creation (comm/group_args.h);
//                       the members' calls differ (above); a Recv whose
//                       dtype or count differs from the peer's Send (the
//                       receiver's error, naming the sender)
//   DeadlineExceeded    a member did not arrive at creation, or its message
//                       did not come within options.timeout, naming it
//   Unavailable         a member's connection failed (kPeerPayload), it
//                       destroyed its communicator (kPeerLeftPayload), or
//                       its own call failed ("stopped", kPeerPayload); UCX
//                       could not start (its words)
//   FailedPrecondition  every call after Abort (unless an earlier error
//                       stands: the group keeps its first error)
//   Internal            a member published a malformed address, a message
//                       that is not devmesh's arrived, the group's tag id
//                       collided with another live group of this process (a
//                       1 in 2^32 chance a pair: make the group again), or
//                       UCX failed in a way not listed here (its words)
//   ResourceExhausted   UCX ran out of memory
//   others              the store's, at creation
//   After any error of a call, the group refuses every later call with it.
//
// Thread-safety: one call at a time per communicator (Abort from any
// thread); distinct communicators from distinct threads.
#ifndef DEVMESH_COMM_UCX_UCX_COMMUNICATOR_H_
#define DEVMESH_COMM_UCX_UCX_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "store/store.h"

namespace devmesh {

// Makes rank `rank` of a `size`-member "ucx" group that meets through
// `store` (keys "ucx/<rank>"); every member calls it. Errors above.
absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options);

}  // namespace devmesh

#endif  // DEVMESH_COMM_UCX_UCX_COMMUNICATOR_H_
