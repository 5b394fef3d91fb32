// devmesh/comm/communicator.h
// -----------------------------------------------------------------------------
// Communicator: one process group. Every rank of the group holds one, and the
// collectives below are called by all of them in the same order (NCCL's and
// MPI's rule). Buffers are contiguous: pointer + element count + DataType.
// On the NCCL backend buffers are device pointers and calls are enqueued on
// the communicator's stream (synchronized before return unless the backend's
// options say otherwise); on the CPU backends ("shm", "ucx", "gloo") they are host
// pointers and calls block.
//
// The class is a front over a backend: its collectives check their
// arguments and count the call, then run the backend's protected Do*
// function. Write a backend by deriving from it and overriding those;
// write a wrapper by deriving from ForwardingCommunicator.
//
// In-place: pass the same pointer as send and recv (AllGather: send is
// recv + rank * count elements; ReduceScatter: send is the full buffer and
// recv is send + rank * count elements), as in NCCL.
//
// Errors:
//   InvalidArgument     a bad argument, found by the front before anything
//                       else (the messages are listed at Communicator's
//                       collectives); on the shared-memory backend, members
//                       whose calls differ (comm/call_check.h: every member
//                       of the call, with kDisagreementPayload; the group
//                       refuses every later call with it)
//   Unimplemented       a backend cannot do the dtype and op, naming them (a
//                       contract for backends added through RegisterBackend;
//                       shm, Gloo and NCCL do all)
//   DeadlineExceeded    a peer did not answer within the timeout
//   Internal            backend failure (message from the backend)
//   Unavailable         backend failure (message from the backend); when
//                       the backend saw, through this host's kernel, that a
//                       member's process is gone (the shm backend: pidfd or
//                       /proc), the status carries the payload
//                       kProcessGonePayload: that member's global rank, in
//                       decimal (ProcessGoneRank reads it)
//   FailedPrecondition  every call with valid arguments after Abort
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/error_info.h"  // IWYU pragma: export
#include "comm/float16.h"
#include "comm/options.h"
#include "comm/work.h"  // IWYU pragma: export

namespace devmesh {

namespace comm_internal {
class AsyncQueue;  // comm/async_queue.h
}  // namespace comm_internal

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

// The front's primitives, for names, error messages and the per-call
// record (calls()).
enum class CallKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kAllToAll,
  kSend,
  kRecv,
  kBarrier,
  kReduce,
  kGather,
  kScatter,
  kAllToAllV,
  kBatchSendRecv,
};
// "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall",
// "send", "recv", "barrier", "reduce", "gather", "scatter", "alltoallv",
// "batch_send_recv": the names error messages use.
absl::string_view CallKindName(CallKind kind);

// One send or receive of Communicator::BatchSendRecv: `count` elements of
// `dtype` at `buf` (read for a send, written for a receive) to or from group
// rank `peer`.
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  void* buf = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kUInt8;
  int peer = -1;

  static P2POp Send(const void* buf, size_t count, DataType dtype, int peer) {
    return P2POp{Kind::kSend, const_cast<void*>(buf), count, dtype, peer};
  }
  static P2POp Recv(void* buf, size_t count, DataType dtype, int peer) {
    return P2POp{Kind::kRecv, buf, count, dtype, peer};
  }
  // Typed: the DataType from T, the count from the span
  // (comm/typed_collectives.h lists the T that have one).
  template <typename T>
  static P2POp Send(absl::Span<const T> buf, int peer);
  template <typename T>
  static P2POp Recv(absl::Span<T> buf, int peer);
};

// One member's collective as the per-call check compares it across the
// group's members (comm/call_check.h): what the front hands a backend with
// each collective (every call but Send, Recv and BatchSendRecv).
struct CallRecord {
  // The collective's number on this communicator, from 1: every collective
  // called on it counts, those the front rejected included (Send, Recv and
  // BatchSendRecv, point to point, do not).
  int64_t seq = 0;
  CallKind kind = CallKind::kBarrier;
  DataType dtype = DataType::kUInt8;  // kUInt8 for Barrier
  ReduceOp op = ReduceOp::kSum;       // kSum where the kind has none
  // Broadcast's, Reduce's, Gather's and Scatter's; -1 for the others.
  int root = -1;
  // Elements: per block for AllGather, ReduceScatter, AllToAll, Gather and
  // Scatter (their `count` argument); 0 for Barrier and AllToAllV (whose
  // per-peer counts are checked by the call itself).
  uint64_t count = 0;
};

// The front: every rank of a group holds one. Its collectives are not
// virtual: each checks its arguments (once, here, for every backend), counts
// the call and hands it to the backend's Do* function below. A backend
// derives from Communicator and overrides the protected Do* functions (one
// per primitive) and the four identity accessors, nothing else; a wrapper
// (a guard, a view) derives from ForwardingCommunicator
// (comm/forwarding_communicator.h).
class Communicator {
 public:
  // Cancels the queued I* calls and waits for a running one (backends
  // call StopAsync first, which aborts it).
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // The backend's registered name: "shm", "ucx", "nccl", "gloo" (where
  // @devmesh//comm:gloo is linked), or a name given to RegisterBackend.
  virtual absl::string_view backend() const = 0;
  // This rank's position in the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The global (world) rank of each group rank, in group order.
  virtual const std::vector<int>& global_ranks() const = 0;

  // Argument errors: InvalidArgument, found here before the backend sees the
  // call, on this rank only (the others wait for it as for a rank that
  // skipped the call), with the message "<backend> <op>: " (op from
  // CallKindName) followed by:
  //   "<send|recv> buffer is null with count N"   a null buffer, count > 0
  //   "invalid dtype value N"                     a DataType outside the enum
  //   "count N x B blocks of <dtype> overflows the byte count"
  //   "invalid ReduceOp value N"                  a ReduceOp outside the enum
  //   "root R is outside [0, N)"                  Broadcast
  //   "peer P is outside [0, N)", "peer P is this rank"   Send, Recv
  // The other errors are the backend's (the table at the top of this file).

  // All-reduce of `count` elements of `dtype`: recv gets `op` over every
  // rank's send. send == recv is in place.
  absl::Status AllReduce(const void* send, void* recv, size_t count,
                         DataType dtype, ReduceOp op);
  // recv holds size() * count elements, rank r's at offset r * count.
  absl::Status AllGather(const void* send, void* recv, size_t count,
                         DataType dtype);
  // send holds size() * count elements; recv gets block rank() reduced.
  absl::Status ReduceScatter(const void* send, void* recv, size_t count,
                             DataType dtype, ReduceOp op);
  // root is a group rank. send is read (and checked) on the root only.
  absl::Status Broadcast(const void* send, void* recv, size_t count,
                         DataType dtype, int root);
  // send and recv hold size() * count elements; block j of send goes to
  // group rank j, block i of recv came from group rank i.
  absl::Status AllToAll(const void* send, void* recv, size_t count,
                        DataType dtype);
  // Reduction to one rank: recv on `root` gets `op` over every rank's send
  // (count elements); recv is not touched elsewhere and may be null there.
  // send == recv on the root is in place.
  absl::Status Reduce(const void* send, void* recv, size_t count,
                      DataType dtype, ReduceOp op, int root);
  // recv on `root` holds size() * count elements and gets rank r's send at
  // offset r * count; recv is not touched elsewhere and may be null there.
  // In place on the root: send is recv + root * count.
  absl::Status Gather(const void* send, void* recv, size_t count,
                      DataType dtype, int root);
  // send on `root` holds size() * count elements; every rank r's recv gets
  // block r of it. send is read on the root only (may be null elsewhere).
  // In place on the root: recv is send + root * count.
  absl::Status Scatter(const void* send, void* recv, size_t count,
                       DataType dtype, int root);
  // All-to-all with per-peer counts (MPI_Alltoallv; PyTorch's
  // all_to_all_single with split sizes). Each span has size() entries, in
  // elements: this rank sends send_counts[j] elements from send +
  // send_offsets[j] to group rank j, and receives recv_counts[i] elements
  // from group rank i at recv + recv_offsets[i]. Rank i's send_counts[j]
  // must equal rank j's recv_counts[i]: on the CPU backends every member
  // checks it, and a pair that differs fails every member with the same
  // InvalidArgument (with kDisagreementPayload naming the receiving
  // member), nothing delivered; on NCCL a mismatch is undefined (NCCL's
  // rule).
  // Blocks may be in any order, and send and recv must not overlap.
  // Extra errors (InvalidArgument, from the front):
  //   "<backend> alltoallv: send_counts has K entries for a group of N"
  //     (likewise send_offsets, recv_counts, recv_offsets)
  //   "<backend> alltoallv: block j of send (offset O, count C) overflows
  //     the byte count" (likewise recv)
  //   "<backend> alltoallv: send and recv overlap"
  //   "<backend> alltoallv: send buffer is null with N elements to send"
  //     (likewise recv)
  // and, from the CPU backends' agreement, on the member that asks (its
  // peers then wait for it until the timeout; no real buffer is that
  // large): "... a count of block j is above 2^62", "... the largest block
  // (B elements) x N overflows the byte count".
  absl::Status AllToAllV(const void* send,
                         absl::Span<const size_t> send_counts,
                         absl::Span<const size_t> send_offsets, void* recv,
                         absl::Span<const size_t> recv_counts,
                         absl::Span<const size_t> recv_offsets,
                         DataType dtype);
  // Point to point: peer is another group rank, which calls Recv (Send)
  // with the same count and dtype.
  absl::Status Send(const void* buf, size_t count, DataType dtype, int peer);
  absl::Status Recv(void* buf, size_t count, DataType dtype, int peer);
  // Sends and receives completed as one call (PyTorch's batch_isend_irecv,
  // NCCL's ncclSend/ncclRecv in a group): returns once every op is done.
  // Whatever the order of `ops` on each member, it cannot deadlock as long
  // as the members' batches match: member a's k-th send to b pairs with
  // b's k-th receive from a (same count and dtype), both in their batches.
  // Not a collective: only the members named take part, and it is not
  // counted in calls(). A peer may appear in several ops, never this rank.
  // On the CPU backends the ops run peer by peer in ascending peer order
  // (each pair both ways), so messages to different peers do not overlap;
  // NCCL runs them as one group.
  // Errors: the front's for each op, as Send's and Recv's, followed by
  // " (batch op #i)"; then the backend's, as for Send and Recv.
  absl::Status BatchSendRecv(absl::Span<const P2POp> ops);
  // Returns once every member has called it.
  absl::Status Barrier();

  // Asynchronous forms (PyTorch's async_op=True, MPI's nonblocking
  // collectives): each queues its blocking form on this communicator's
  // progress thread and returns a Work at once (comm/work.h). The thread is
  // started at the first I* call (one per communicator, for its lifetime).
  // Calls run one at a time in issue order, blocking calls included: a
  // blocking call first waits for the I* calls issued before it. The
  // buffers must stay valid until the Work is done; AllToAllV's spans and
  // BatchSendRecv's ops are copied at the call. The Work's Status is the
  // blocking form's, argument errors included; Abort ends the running call
  // and makes every queued one fail (FailedPrecondition); a peer's death
  // ends them with the backend's error; a communicator destroyed first
  // aborts the running call (which then fails as after Abort) and ends
  // the calls it never ran with Cancelled. Issue them from the thread
  // that issues this communicator's blocking calls (the thread-safety rule
  // below).
  // Calls run one at a time, so ISend and IRecv do not overlap each other:
  // two members that each ISend to the other and then IRecv wait for each
  // other until the timeout on Gloo and shm (whose sends wait for the
  // receive) and for large messages on UCX, where PyTorch and MPI let them
  // pass. Exchange with one IBatchSendRecv instead. A wrapper
  // (ForwardingCommunicator) over a CPU backend has a progress thread of
  // its own: do not mix calls on a wrapper and on the communicator it wraps.
  // NCCL has no progress thread: its I* calls (also through wrappers) are
  // enqueued on the CUDA stream by the caller's thread, and their Work ends
  // with the work on the stream (comm/nccl/nccl_communicator.h).
  Work IAllReduce(const void* send, void* recv, size_t count, DataType dtype,
                  ReduceOp op);
  Work IAllGather(const void* send, void* recv, size_t count, DataType dtype);
  Work IReduceScatter(const void* send, void* recv, size_t count,
                      DataType dtype, ReduceOp op);
  Work IBroadcast(const void* send, void* recv, size_t count, DataType dtype,
                  int root);
  Work IAllToAll(const void* send, void* recv, size_t count, DataType dtype);
  Work IReduce(const void* send, void* recv, size_t count, DataType dtype,
               ReduceOp op, int root);
  Work IGather(const void* send, void* recv, size_t count, DataType dtype,
               int root);
  Work IScatter(const void* send, void* recv, size_t count, DataType dtype,
                int root);
  Work IAllToAllV(const void* send, absl::Span<const size_t> send_counts,
                  absl::Span<const size_t> send_offsets, void* recv,
                  absl::Span<const size_t> recv_counts,
                  absl::Span<const size_t> recv_offsets, DataType dtype);
  Work ISend(const void* buf, size_t count, DataType dtype, int peer);
  Work IRecv(void* buf, size_t count, DataType dtype, int peer);
  Work IBatchSendRecv(absl::Span<const P2POp> ops);
  Work IBarrier();
  // Returns once every I* call issued before it has ended (every blocking
  // call does this first). From the issuing thread.
  void WaitForAsync();

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
  absl::Status Reduce(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv,
                      ReduceOp op, int root);
  template <typename T>
  absl::Status Gather(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv,
                      int root);
  template <typename T>
  absl::Status Scatter(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv,
                       int root);
  template <typename T>
  absl::Status AllToAllV(absl::Span<const NoDeduce<T>> send,
                         absl::Span<const size_t> send_counts,
                         absl::Span<T> recv,
                         absl::Span<const size_t> recv_counts);
  template <typename T>
  Work IAllReduce(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv,
                  ReduceOp op);
  template <typename T>
  Work IAllReduce(absl::Span<T> buf, ReduceOp op);
  template <typename T>
  Work IAllGather(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv);
  template <typename T>
  Work IReduceScatter(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv,
                      ReduceOp op);
  template <typename T>
  Work IBroadcast(absl::Span<T> buf, int root);
  template <typename T>
  Work IAllToAll(absl::Span<const NoDeduce<T>> send, absl::Span<T> recv);
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
  //   InvalidArgument  "<backend> split: color C must be >= 0 or kNoColor
  //                    (-1)"; "<backend> split: timeout (T) must be
  //                    positive"
  //   others           the backend's, after the checks above
  absl::StatusOr<std::unique_ptr<Communicator>> Split(
      int color, int key, const SplitOptions& options);
  // Split with the parent's options.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) {
    return Split(color, key, SplitOptions());
  }

  // Stops the group: pending and later calls fail (FailedPrecondition).
  // Local: peers need not call it; they see this rank's calls fail. Safe
  // from any thread, at any time; a second Abort is OK.
  absl::Status Abort();

  // The collectives called on this communicator so far (CallRecord::seq of
  // the last one): every call but Send, Recv and BatchSendRecv, whether
  // the front rejected it or not. Any thread may read it.
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }

 protected:
  Communicator();
  // For ForwardingCommunicator: a front whose Do* functions call another
  // front, which makes the checks; this one only counts.
  struct Forwarding {};
  explicit Communicator(Forwarding);

  // Ends the progress thread, if any: the queued I* calls end with
  // Cancelled, a running one is aborted (DoAbort) and waited for. A backend
  // calls it first in its destructor, while the state a running call uses
  // is intact (the base destructor calls it again, a no-op by then).
  void StopAsync();

  // How the I* calls start. The default queues `call` (the blocking form)
  // on this communicator's progress thread. A backend whose calls are
  // asynchronous by nature (NCCL: enqueued on a CUDA stream) overrides
  // both: StartsAsyncItself returns true, and StartAsync runs `call` on the
  // caller's thread in an enqueue-only mode and returns a Work that ends
  // with the enqueued work (Work::FromPoll). A ForwardingCommunicator over
  // such a backend hands its I* calls to the backend's StartAsync, so that
  // they too run on the caller's thread.
  virtual bool StartsAsyncItself() const { return false; }
  virtual Work StartAsync(std::function<absl::Status()> call);

  // The collective the front is handing to the backend: valid during a
  // collective's Do* function (every one but DoSend, DoRecv,
  // DoBatchSendRecv, DoSplit and DoAbort), on the calling thread, including the primitives a default
  // DoReduce, DoGather, DoScatter or DoAllToAllV runs. A backend's per-call
  // check compares it across the members (comm/call_check.h).
  const CallRecord& current_call() const { return current_; }

  // The backend interface: one function per primitive, called by the front
  // with its arguments checked as documented above (buffers non-null where
  // count > 0, dtype and op in their enums, the root and the peer in range,
  // peer != rank(), Split's color >= kNoColor and timeout positive). The
  // arguments mean what the front's do. Thread-safety as the front's: one
  // call at a time, but DoAbort from any thread during any other call.
  virtual absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                                   DataType dtype, ReduceOp op) = 0;
  virtual absl::Status DoAllGather(const void* send, void* recv, size_t count,
                                   DataType dtype) = 0;
  virtual absl::Status DoReduceScatter(const void* send, void* recv,
                                       size_t count, DataType dtype,
                                       ReduceOp op) = 0;
  virtual absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                                   DataType dtype, int root) = 0;
  virtual absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                                  DataType dtype) = 0;
  virtual absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                              int peer) = 0;
  virtual absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                              int peer) = 0;
  virtual absl::Status DoBarrier() = 0;
  virtual absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) = 0;
  virtual absl::Status DoAbort() = 0;

  // The rooted collectives and AllToAllV, with defaults that compose the
  // primitives above (comm/composite_collectives.cc) for a backend of host
  // memory without its own: Reduce is an all-reduce (into a scratch buffer
  // off the root), Gather an all-gather, Scatter a broadcast of the root's
  // whole buffer, and AllToAllV an all-to-all of the counts, an all-reduce
  // of their check and an all-to-all padded to the largest block. A backend
  // of device memory (NCCL) must override all four. Contract as the Do*
  // functions above; the front has checked the spans' sizes, the offsets'
  // overflow and the overlap.
  virtual absl::Status DoReduce(const void* send, void* recv, size_t count,
                                DataType dtype, ReduceOp op, int root);
  virtual absl::Status DoGather(const void* send, void* recv, size_t count,
                                DataType dtype, int root);
  virtual absl::Status DoScatter(const void* send, void* recv, size_t count,
                                 DataType dtype, int root);
  // The first steps of the default DoAllToAllV, for a backend's own: an
  // all-to-all of the counts and one all-reduce, which every member ends
  // with the same result: the largest block (elements; block x size() x 2
  // x the dtype's width fits in size_t), or the InvalidArgument of a pair
  // whose counts differ (documented at AllToAllV). Runs the backend's
  // DoAllToAll, DoAllReduce and, on a mismatch, DoBroadcast.
  absl::StatusOr<size_t> AgreeOnAllToAllV(absl::Span<const size_t> send_counts,
                                          absl::Span<const size_t> recv_counts,
                                          DataType dtype);
  // Default: the ops grouped by peer, peers in ascending order (the global
  // order of pairs, so no cycle of waits), the lower rank of each pair
  // sending first; over DoSend and DoRecv.
  virtual absl::Status DoBatchSendRecv(absl::Span<const P2POp> ops);
  virtual absl::Status DoAllToAllV(const void* send,
                                   absl::Span<const size_t> send_counts,
                                   absl::Span<const size_t> send_offsets,
                                   void* recv,
                                   absl::Span<const size_t> recv_counts,
                                   absl::Span<const size_t> recv_offsets,
                                   DataType dtype);

 private:
  // `name`'s buffer of `blocks` x `count` elements (InvalidArgument as
  // documented above).
  absl::Status CheckBuffer(CallKind kind, absl::string_view name,
                           const void* ptr, size_t count, size_t blocks,
                           DataType dtype) const;
  absl::Status CheckOp(CallKind kind, ReduceOp op) const;
  // A root (`is_peer` false) or a peer (true) of Broadcast, Send, Recv.
  absl::Status CheckRank(CallKind kind, int value, bool is_peer) const;
  // AllToAllV's spans and buffers (the errors listed at AllToAllV).
  absl::Status CheckAllToAllV(const void* send,
                              absl::Span<const size_t> send_counts,
                              absl::Span<const size_t> send_offsets,
                              const void* recv,
                              absl::Span<const size_t> recv_counts,
                              absl::Span<const size_t> recv_offsets,
                              DataType dtype) const;
  // Numbers the collective `kind` and makes it current_call().
  void Begin(CallKind kind, DataType dtype, ReduceOp op, int root,
             size_t count);
  // A collective a typed form rejected before its void* form ran: numbered
  // all the same (CallRecord::seq counts rejected calls), then `error`.
  absl::Status Rejected(CallKind kind, DataType dtype, absl::Status error) {
    WaitForAsync();
    NoteRejected(kind, dtype);
    return error;
  }
  // Numbers a rejected collective; a ForwardingCommunicator also has its
  // inner front number it, so that the backend's per-call check sees it.
  virtual void NoteRejected(CallKind kind, DataType dtype) {
    Begin(kind, dtype, ReduceOp::kSum, -1, 0);
  }
  friend class ForwardingCommunicator;

  // Starts an I* call: StartAsync.
  Work Async(std::function<absl::Status()> call) {
    return StartAsync(std::move(call));
  }

  // At least `bytes` of uninitialized scratch for the default composites,
  // kept between calls (the largest asked for so far; one call at a time,
  // as every collective).
  char* Scratch(size_t bytes);

  const bool checks_ = true;
  std::atomic<int64_t> calls_{0};
  CallRecord current_;
  std::unique_ptr<char[]> scratch_;
  size_t scratch_bytes_ = 0;
  std::unique_ptr<comm_internal::AsyncQueue> async_;
};

}  // namespace devmesh

// The typed collectives' definitions (they need the class complete).
#include "comm/typed_collectives.h"  // IWYU pragma: export

#endif  // DEVMESH_COMM_COMMUNICATOR_H_
