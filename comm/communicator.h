// devmesh/comm/communicator.h
// -----------------------------------------------------------------------------
// Communicator: one process group. Every rank of the group holds one, and the
// collectives below are called by all of them in the same order (NCCL's and
// MPI's rule). Buffers are contiguous: pointer + element count + DataType.
// On the NCCL backend buffers are device pointers and calls are enqueued on
// the communicator's stream (synchronized before return unless the backend's
// options say otherwise); on Gloo they are host pointers and calls block.
//
// In-place: pass the same pointer as send and recv (AllGather: send is
// recv + rank * count elements; ReduceScatter: send is the full buffer and
// recv is send + rank * count elements), as in NCCL.
//
// Errors:
//   InvalidArgument     null buffer with count > 0; bad root/peer rank
//   Unimplemented       a backend cannot do the dtype and op, naming them (a
//                       contract for backends added through RegisterBackend;
//                       Gloo and NCCL do all)
//   DeadlineExceeded    a peer did not answer within the timeout
//   Internal            backend failure (message from the backend)
//   Unavailable         backend failure (message from the backend); when
//                       the backend saw, through this host's kernel, that a
//                       member's process is gone (the shm backend: pidfd or
//                       /proc), the status carries the payload
//                       kProcessGonePayload: that member's global rank, in
//                       decimal (ProcessGoneRank reads it)
//   FailedPrecondition  every call after Abort
//
// Signals: the Gloo backend ignores SIGPIPE in the process (unless the
// program installed a handler), so that a vanished peer is an error, not a
// killed process.
//
// Thread-safety: a Communicator is not safe for concurrent collectives from
// several threads (NCCL's rule); distinct Communicators may be used from
// distinct threads.
#ifndef DEVMESH_COMM_COMMUNICATOR_H_
#define DEVMESH_COMM_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/float16.h"
#include "comm/options.h"

namespace devmesh {

// The absl::Status payload (type URL) of an error for which the backend saw,
// through this host's kernel, that a member's process is gone; its value is
// that member's global rank in decimal.
inline constexpr absl::string_view kProcessGonePayload =
    "devmesh/process-gone";

// `error` with that payload naming `global_rank`.
absl::Status WithProcessGone(absl::Status error, int global_rank);

// The global rank `error`'s kProcessGonePayload names; -1 when it has none
// (or one that is not a rank).
int ProcessGoneRank(const absl::Status& error);

enum class DataType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
};

// Bytes per element of `dtype`.
size_t DataTypeSize(DataType dtype);
// "float32", "bfloat16", ... (the names --dtype flags take).
absl::string_view DataTypeName(DataType dtype);
// Inverse of DataTypeName.
// Errors:
//   InvalidArgument  `name` is not a DataTypeName (naming `name`)
absl::StatusOr<DataType> ParseDataType(absl::string_view name);

enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };
absl::string_view ReduceOpName(ReduceOp op);

// T itself, in a context where T is not deduced (std::type_identity_t of
// C++20): the typed collectives deduce T from the receive span only.
template <typename T>
struct NoDeduceImpl {
  using type = T;
};
template <typename T>
using NoDeduce = typename NoDeduceImpl<T>::type;

// The color passed to Split by a rank that joins no child (NCCL's
// NCCL_SPLIT_NOCOLOR).
inline constexpr int kNoColor = -1;

// What a child of Split may set for itself instead of inheriting it from
// its parent (devmesh's own; PyTorch's new_group takes a timeout and NCCL
// options, and ncclCommSplit a config, but no Split of a Gloo group does).
// Used so that a group with its own timeout costs one Split, never a new
// world communicator.
struct SplitOptions {
  // Bound on the child's creation and on each of its collectives. Unset:
  // the parent's. Must be positive (InvalidArgument).
  std::optional<absl::Duration> timeout;
  // NCCL only: the child's config (ncclCommSplit's ncclConfig_t argument:
  // blocking, splitShare, CTAs, netName; its cuda_device and stream are the
  // parent's). Unset: the parent's. Other backends ignore it.
  std::optional<NcclOptions> nccl;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // "gloo" or "nccl".
  virtual absl::string_view backend() const = 0;
  // This rank's position in the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The global (world) rank of each group rank, in group order.
  virtual const std::vector<int>& global_ranks() const = 0;

  virtual absl::Status AllReduce(const void* send, void* recv, size_t count,
                                 DataType dtype, ReduceOp op) = 0;
  // recv holds size() * count elements, rank r's at offset r * count.
  virtual absl::Status AllGather(const void* send, void* recv, size_t count,
                                 DataType dtype) = 0;
  // send holds size() * count elements; recv gets block rank() reduced.
  virtual absl::Status ReduceScatter(const void* send, void* recv,
                                     size_t count, DataType dtype,
                                     ReduceOp op) = 0;
  // root is a group rank. send is read on the root only.
  virtual absl::Status Broadcast(const void* send, void* recv, size_t count,
                                 DataType dtype, int root) = 0;
  // send and recv hold size() * count elements; block j of send goes to
  // group rank j, block i of recv came from group rank i.
  virtual absl::Status AllToAll(const void* send, void* recv, size_t count,
                                DataType dtype) = 0;
  // Point to point; peer is a group rank.
  virtual absl::Status Send(const void* buf, size_t count, DataType dtype,
                            int peer) = 0;
  virtual absl::Status Recv(void* buf, size_t count, DataType dtype,
                            int peer) = 0;
  virtual absl::Status Barrier() = 0;

  // Typed forms of the collectives above over host spans: the DataType comes
  // from T, the count from the spans (checked). Documented, with their
  // errors, in comm/typed_collectives.h. Send's span is not deduced (T comes
  // from recv), so a vector or a mutable span may be passed for it.
  template <typename T>
  absl::Status AllReduce(absl::Span<const NoDeduce<T>> send,
                         absl::Span<T> recv, ReduceOp op);
  template <typename T>
  absl::Status AllReduce(absl::Span<T> buf, ReduceOp op);
  template <typename T>
  absl::Status AllGather(absl::Span<const NoDeduce<T>> send,
                         absl::Span<T> recv);
  template <typename T>
  absl::Status ReduceScatter(absl::Span<const NoDeduce<T>> send,
                             absl::Span<T> recv, ReduceOp op);
  template <typename T>
  absl::Status Broadcast(absl::Span<const NoDeduce<T>> send,
                         absl::Span<T> recv, int root);
  template <typename T>
  absl::Status Broadcast(absl::Span<T> buf, int root);
  template <typename T>
  absl::Status AllToAll(absl::Span<const NoDeduce<T>> send,
                        absl::Span<T> recv);
  template <typename T>
  absl::Status Send(absl::Span<const T> buf, int peer);
  template <typename T>
  absl::Status Send(absl::Span<T> buf, int peer);
  template <typename T>
  absl::Status Recv(absl::Span<T> buf, int peer);

  // Collective over this group: ranks passing the same `color` (>= 0) form a
  // child group ordered by (key, parent rank), as ncclCommSplit. A rank
  // passing kNoColor joins none and gets nullptr. The child has the
  // parent's options except those set in `options` (every rank of the
  // parent passes the same).
  // Errors:
  //   InvalidArgument  color < -1; a timeout that is not positive
  //   others           the backend's, after the checks above
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(
      int color, int key, const SplitOptions& options) = 0;
  // Split with the parent's options.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) {
    return Split(color, key, SplitOptions());
  }

  // Stops the group: pending and later calls fail. Safe from any thread.
  virtual absl::Status Abort() = 0;
};

}  // namespace devmesh

// A class derived from Communicator that overrides the void* collectives puts
// this in its public section: C++ hides a base class's overloads of every
// name the derived class declares, so without it the typed forms and
// Split(color, key) could not be called through the derived type (only
// through Communicator&). Every devmesh backend class (GlooCommunicator,
// ShmCommunicator, NcclCommunicator) has it.
#define DEVMESH_USING_COMMUNICATOR_OVERLOADS    \
  using ::devmesh::Communicator::AllReduce;     \
  using ::devmesh::Communicator::AllGather;     \
  using ::devmesh::Communicator::ReduceScatter; \
  using ::devmesh::Communicator::Broadcast;     \
  using ::devmesh::Communicator::AllToAll;      \
  using ::devmesh::Communicator::Send;          \
  using ::devmesh::Communicator::Recv;          \
  using ::devmesh::Communicator::Split

// The typed collectives' definitions (they need the class complete).
#include "comm/typed_collectives.h"  // IWYU pragma: export

#endif  // DEVMESH_COMM_COMMUNICATOR_H_
