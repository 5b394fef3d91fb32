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
//                  order, then copied: identical bits on every member).
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
// Errors: the transport's, unchanged; the algorithms add none.
// Thread-safety: one call at a time per PointToPoint and Workspace.
#ifndef DEVMESH_COMM_ALGORITHMS_P2P_COLLECTIVES_H_
#define DEVMESH_COMM_ALGORITHMS_P2P_COLLECTIVES_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
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

// What an algorithm needs of a transport.
class PointToPoint {
 public:
  virtual ~PointToPoint() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
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

// The collectives of comm/communicator.h with its arguments (counts in
// elements; AllGather, ReduceScatter and AllToAll: per block).
absl::Status AllReduce(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype, ReduceOp op);
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
