// devmesh/comm/algorithms/p2p_collectives.h
// -----------------------------------------------------------------------------
// The collective algorithms written once over point-to-point messages, for
// any transport that can post a set of sends and receives and wait for them
// (comm/ucx today). Each function is called by every member of the group
// with the same arguments (the front checked them; comm/communicator.h) and
// gives every member the same bits.
//
//   AllReduce      recursive doubling (with the usual fold of the ranks past
//                  the largest power of two) up to kP2pSmallAllReduceBytes
//                  or when count < size; above, ring reduce-scatter followed
//                  by ring all-gather (each element reduced once, in ring
//                  order, then copied: identical bits on every member),
//                  pipelined: each ring block travels in pieces of
//                  kP2pPipelineChunkBytes, every receive is posted at the
//                  start, and a piece is reduced and passed on while the
//                  next ones are in flight.
//   AllGather      ring, n - 1 steps.
//   ReduceScatter  ring, n - 1 steps.
//   Broadcast      binomial tree from the root.
//   AllToAll       pairwise exchange, n - 1 steps (step k: send to r + k,
//                  receive from r - k).
//   Barrier        dissemination, ceil(log2 n) rounds of empty messages.
//
// Arithmetic: comm/reduce_functions.h (kAvg sums, then divides by size()).
// In place as in NCCL (comm/communicator.h); send and recv may also
// overlap partially (the input is copied first).
//
// Errors: the transport's, unchanged; the algorithms add none (but
// RingAllReduce's argument checks).
// Thread-safety: one call at a time per PointToPoint and Workspace.
#ifndef DEVMESH_COMM_ALGORITHMS_P2P_COLLECTIVES_H_
#define DEVMESH_COMM_ALGORITHMS_P2P_COLLECTIVES_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/communicator.h"

namespace devmesh {
namespace algorithms {

// One message of a step: `bytes` bytes to (SendSpec) or from (RecvSpec)
// group rank `peer`. `bytes` may be 0 (the message still travels: a
// barrier's). A receive's `bytes` equals the matching send's.
struct SendSpec {
  int peer = -1;
  const void* data = nullptr;
  size_t bytes = 0;
};
struct RecvSpec {
  int peer = -1;
  void* data = nullptr;
  size_t bytes = 0;
};

// A message started by PointToPoint::Post: 0, 1, 2, ... in posting order,
// counted from the last WaitAll.
using Ticket = size_t;

// What an algorithm needs of a transport.
class PointToPoint {
 public:
  virtual ~PointToPoint() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts one message and returns at once with its ticket; the buffer must
  // stay valid (a send's unchanged, a receive's untouched by the caller)
  // until Wait of that ticket, or WaitAll, returned OK. Posted messages and
  // those of Exchange are matched in posting order between two members, as
  // in Exchange. Errors: the transport's; after any error of Post, Wait or
  // WaitAll every posted message has ended (cancelled or finished) and
  // nothing is left to wait for.
  virtual absl::StatusOr<Ticket> Post(const SendSpec& send) = 0;
  virtual absl::StatusOr<Ticket> Post(const RecvSpec& recv) = 0;
  // Returns once the message `ticket` completed (a receive's data is in its
  // buffer and checked as Exchange checks it), or with the first error.
  // `ticket` is one Post returned since the last WaitAll.
  virtual absl::Status Wait(Ticket ticket) = 0;
  // Waits for every posted message; tickets then start again at 0. Exchange
  // is called only with no message posted (after WaitAll).
  virtual absl::Status WaitAll() = 0;
  // Posts every send and every receive, then returns once all completed, or
  // with the first error (the transport's; the others are cancelled or
  // finished before it returns). Messages from one member to another are
  // matched in the order they were posted, within a call and across calls.
  // Send buffers are not written; receive buffers do not overlap each other
  // or any send buffer of the same call.
  virtual absl::Status Exchange(absl::Span<const SendSpec> sends,
                                absl::Span<const RecvSpec> recvs) = 0;
};

// Scratch memory kept between calls (so that a 64 MiB all-reduce does not
// fault in fresh pages each time). Not shared between threads.
class Workspace {
 public:
  // At least `bytes` bytes, 64-byte aligned; valid until the next Get.
  void* Get(size_t bytes);

 private:
  std::vector<char> buffer_;
};

// All-reduces at or below this many bytes take recursive doubling.
inline constexpr size_t kP2pSmallAllReduceBytes = 64 * 1024;
// The ring all-reduce's pieces: a block travels in messages of at most this
// many bytes (whole elements).
inline constexpr size_t kP2pPipelineChunkBytes = 256 * 1024;

// The collectives of comm/communicator.h with its arguments (counts in
// elements; AllGather, ReduceScatter and AllToAll: per block).
absl::Status AllReduce(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype, ReduceOp op);
// AllReduce's ring path with pieces of `chunk_bytes` bytes (rounded down to
// whole elements, at least one), whatever the size: for tests of the
// pipeline's edges. Otherwise as AllReduce. Errors: InvalidArgument when
// chunk_bytes is 0 or count < p2p.size(); else the transport's.
absl::Status RingAllReduce(PointToPoint& p2p, Workspace& ws, const void* send,
                           void* recv, size_t count, DataType dtype,
                           ReduceOp op, size_t chunk_bytes);
absl::Status AllGather(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype);
absl::Status ReduceScatter(PointToPoint& p2p, Workspace& ws, const void* send,
                           void* recv, size_t count, DataType dtype,
                           ReduceOp op);
absl::Status Broadcast(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype, int root);
absl::Status AllToAll(PointToPoint& p2p, Workspace& ws, const void* send,
                      void* recv, size_t count, DataType dtype);
absl::Status Barrier(PointToPoint& p2p);

}  // namespace algorithms
}  // namespace devmesh

#endif  // DEVMESH_COMM_ALGORITHMS_P2P_COLLECTIVES_H_
