// devmesh/comm/gloo/gloo_communicator.h
// -----------------------------------------------------------------------------
// The Gloo backend of Communicator: host buffers, TCP transport, blocking
// calls. Rendezvous goes through the devmesh Store; every rank's context
// connects a full mesh to the other ranks of its group (gloo_full_mesh.h).
//
// Creation: CreateGlooCommunicator connects the group under the store key
// prefix "gloo/". Split(color, key) all-gathers (color, key) over this group
// through the store (Set "<parent prefix>split/<n>/ck/<rank>", MultiGet of
// all: 2 round trips; a rank passing kNoColor only Sets and returns), then
// connects the child over the prefix "<parent prefix>split/<n>/<color>/",
// n = how many Splits this communicator has done. Through the store rather
// than a Gloo all-gather so that a rank that never calls Split is named on
// every peer, and every peer gets DeadlineExceeded (a Gloo timeout closes
// the pair, and a slower peer would see "connection closed"). Children share the parent's TCP device (one event
// loop thread per process). Creation completes everywhere before it returns
// anywhere: it ends with a store barrier among the new group's members (as
// PyTorch's new_group), so a member that returns and at once exits, aborts or
// destroys the group cannot break a peer still connecting. Store round trips
// per rank, whatever the group size: 4 per connection (see
// gloo_full_mesh.h; 2 of them the barrier), so 4 for the world group and
// 6 per Split child.
//
// Semantics: see comm/communicator.h. Every dtype and op is supported:
// float16/bfloat16 reduce in float32 and round back; integer sum/prod wrap;
// avg = sum then divide by size() (integers truncate toward zero).
// In a group that crosses hosts and whose size is a power of two (or any
// power-of-two group with DEVMESH_GLOO_SYNC_ROUTE=1), AllReduce of at most
// GlooSyncMaxBytes() (kGlooSyncMaxBytes, 256 KiB, unless
// DEVMESH_GLOO_SYNC_MAX_BYTES says otherwise) runs Gloo's bcube over the
// group's synchronous pairs, read on the calling thread
// (gloo_sync_allreduce.h): a second mesh of log2(size) pairs per member,
// connected with the first one in the same store exchange and barrier (no
// more store round trips; log2(size) more connections). Every other
// all-reduce, and all once that route's slot budget is spent, runs Gloo's
// bcube up to kGlooBcubeMaxBytes and Gloo's ring above, on Gloo's
// event-loop thread.
//
// Such a group (one with the synchronous route) connects only the route's
// log2(size) pairs at creation; its other pairs listen, their peers'
// addresses exchanged, and connect at the first call that needs them, as
// NCCL connects at first use (NCCL_RUNTIME_CONNECT) and PyTorch's Gloo with
// TORCH_GLOO_LAZY_INIT: every pair at the first collective off the route
// (an all-reduce above the route's bound, AllGather, ReduceScatter,
// Broadcast, AllToAll, Barrier), the peer's pair at a Send or Recv. That
// call then also bears the connections' cost and their errors (Unavailable
// naming a peer that is gone, DeadlineExceeded naming the one not
// connected within the timeout); a failed connection fails every later call
// that needs the mesh with the same error. At 1024 ranks over 8 namespace
// hosts (32-member dp groups) creation then makes 5 connections per rank
// instead of 36. DEVMESH_GLOO_LAZY_MESH=0 (read once per process, the same
// on every member) connects every pair at creation.
//
// Bounds (CommOptions::timeout = T). Creation: one deadline T for the whole
// call (Split: the (color, key) exchange, the connections and the barrier
// together); Gloo's own pair connect would wait 5 x T per pair, so a watchdog
// closes the pairs still unconnected at the deadline. Margin: one woken turn
// of Gloo's event loop (gloo_loop_waker.h; at most Gloo's 10 ms tick) per
// pair still open, plus one store round trip per member
// on the DeadlineExceeded path (to name the missing ranks). Collectives,
// Send, Recv, Barrier: Gloo's timeout T on each of its blocking waits (the
// operation's option, else the context's, which devmesh sets to T), so a
// call ends at most T after its peers stop making progress. Abort: shuts the
// group's sockets down under Gloo (gloo_shutdown.h), so that Gloo's event
// loop fails every wait on them and closes each pair itself (a pair whose
// socket is gone already, or was never found, is closed directly: a no-op
// when Gloo closed it), never waiting for peers; a
// collective running in another thread then fails at once with "connection
// closed", and the peers' collectives on this group too (an unbound send
// Gloo had already queued for writing still ends only at its timeout). Destruction: closes the connections, one
// woken event-loop turn per pair (gloo_loop_waker.h), never waits for peers. These bounds assume the
// store answers (its own timeouts bound it otherwise).
//
// Errors never escape as exceptions: every call into Gloo goes through
// GlooCall (gloo_status.h). Messages name the peer: the global rank whose
// connection failed, or whose address / connection was missing at the
// deadline. Gloo's own event-loop thread throws where nothing can catch
// when getpeername() fails on a connection reset during its set-up (a peer
// SIGKILLed just after it connected): devmesh's getpeername() answers that
// one call for Gloo (gloo_accept_guard.h), so the pair fails with
// Unavailable instead of the process aborting.
//
// Send and Recv: each message starts with a header (dtype, count) that the
// receiver compares with its own call before it takes the data (at most
// 64 KiB travels inline in the header's message, more as a second
// message). A Recv whose dtype or count differs from the Send's returns
// InvalidArgument with kDisagreementPayload (the sender's global rank),
// receives nothing and leaves the pair usable (the error says when it is
// not: a dtype this build does not know, or data that could not be
// drained for lack of memory); the Send returns OK. A
// count of 0 sends nothing (OK at once on both sides), so a Recv of N
// against a Send of 0 waits for the timeout.
//
// Thread-safety: one collective at a time per communicator (NCCL's rule);
// Abort may be called from any thread and makes the running call fail.
#ifndef DEVMESH_COMM_GLOO_GLOO_COMMUNICATOR_H_
#define DEVMESH_COMM_GLOO_GLOO_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_abortable_context.h"
#include "comm/gloo/gloo_full_mesh.h"
#include "comm/gloo/gloo_shutdown.h"
#include "comm/gloo/gloo_sync_allreduce.h"
#include "comm/options.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "store/annotated_mutex.h"
#include "store/store.h"

namespace devmesh {

// Gloo all-reduces of at most this many bytes run Gloo's bcube algorithm
// (2 log2(n) latency-bound steps for n a power of two), larger ones the ring
// (2 (n - 1) steps, bandwidth-optimal). Not configurable: both algorithms
// use the same Gloo slot, and members running different ones would read
// each other's messages with the wrong lengths (Gloo then terminates or
// reads short). Why 4 MiB: docs/design_figures.md.
inline constexpr size_t kGlooBcubeMaxBytes = size_t{4} << 20;

// Connects rank `rank` of a `size`-rank Gloo group through `store`.
// Called by every rank of the group with the same size and options; returns
// on no rank before every rank is connected (store barrier).
// Errors: InvalidArgument (store null, size < 1, rank outside [0, size),
// timeout not positive, global_ranks of the wrong length or with a negative
// or repeated rank); DeadlineExceeded (a peer did not arrive, connect or
// reach the barrier within options.timeout; names the global ranks);
// Unavailable (device failure, or a connection refused / reset, naming the
// peer's global rank).
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options);

class GlooCommunicator final : public Communicator {
 public:
  // Connects a group over `store` under `prefix` on an existing `device`,
  // ending by `deadline` (+ the margin above). Arguments are assumed
  // checked (CreateGlooCommunicator, Split).
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Connect(
      std::shared_ptr<Store> store, std::string prefix, int rank, int size,
      std::vector<int> global_ranks, const CommOptions& options,
      std::shared_ptr<::gloo::transport::Device> device, absl::Time deadline);

  ~GlooCommunicator() override { StopAsync(); }

  absl::string_view backend() const override { return "gloo"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& global_ranks() const override {
    return global_ranks_;
  }

 protected:
  // The backend interface (comm/communicator.h).
  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override;
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override;
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override;
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override;
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override;
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override;
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override;
  absl::Status DoBarrier() override;
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override;
  absl::Status DoAbort() override;

 public:
  // The Gloo context, for benchmarks that call Gloo directly.
  const std::shared_ptr<::gloo::Context>& context() const { return context_; }
  // Store calls made while creating this group (4 for a world group of
  // size > 1, 6 for a Split child of size > 1; the synchronous all-reduce
  // route, gloo_sync_allreduce.h, is made in the same calls).
  int64_t store_round_trips() const { return store_round_trips_; }
  // Of those, the creation barrier's (2 when size > 1).
  int64_t barrier_round_trips() const { return barrier_round_trips_; }
  // Gloo algorithms built for the synchronous route so far
  // (gloo_sync_allreduce.h); -1 when the group has no route. For tests;
  // call from the thread that runs the collectives.
  int64_t sync_builds() const;
  // Pairs still left for first use (gloo_communicator.h's lazy mesh): size
  // - 1 right after creating a group with the synchronous route, 0 once a
  // collective off the route ran. For tests. Thread-safe.
  int64_t pending_pairs() const;

 private:
  GlooCommunicator() = default;

  // GlooCall, plus the global rank of the peer Gloo's message names (by its
  // connection endpoint), else the group's global ranks.
  absl::Status Call(absl::string_view what,
                    absl::FunctionRef<void()> fn) const;
  // FailedPrecondition after Abort.
  absl::Status CheckOpen(absl::string_view op) const;
  std::chrono::milliseconds timeout() const;
  // Connects the pairs left for first use (pending_): every one for a
  // collective (peer = -1), only the one with `peer` for Send and Recv.
  // Bounded by the group's timeout; Abort ends it. A failure is kept and
  // returned by every later call that needs the mesh.
  absl::Status ConnectPending(absl::string_view op, int peer);

  std::shared_ptr<Store> store_;
  std::string prefix_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> global_ranks_;
  CommOptions options_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::Context> context_;
  std::atomic<bool> aborted_{false};
  int64_t split_count_ = 0;
  int64_t store_round_trips_ = 0;
  int64_t barrier_round_trips_ = 0;
  // Each peer's "[ip]:port" end of its connection with this rank -> its
  // global rank (gloo_full_mesh.h).
  std::map<std::string, int> peer_endpoints_;
  // Where Recv takes a message's header and inline data (DoRecv).
  std::vector<char> recv_head_;
  // Guards connections_ (Abort reads it from any thread), pending_ and
  // mesh_failed_.
  mutable sync_internal::Mutex mesh_mu_;
  // Peer group rank -> the inode of the socket of its connection
  // (gloo_shutdown.h).
  std::map<int, ino_t> connections_ ABSL_GUARDED_BY(mesh_mu_);
  // The mesh's pairs not connected yet (ConnectFullMesh's defer_mesh, for a
  // group with the synchronous route): connected by the first call that
  // needs them (ConnectPending).
  std::vector<gloo_internal::MeshLink> pending_ ABSL_GUARDED_BY(mesh_mu_);
  // The error of a ConnectPending that failed; OK otherwise.
  absl::Status mesh_failed_ ABSL_GUARDED_BY(mesh_mu_);
  // Set once pending_ is empty and mesh_failed_ OK for good: every later
  // ConnectPending returns at once, without mesh_mu_.
  std::atomic<bool> mesh_connected_{false};
  // The transport context, whose Abort ends every wait of the group's
  // buffers (gloo_abortable_context.h).
  std::shared_ptr<gloo_internal::AbortableContext> abortable_;
  // The synchronous route (gloo_sync_allreduce.h), made with the group when
  // GlooSyncRouteWanted; null otherwise. Set before the communicator is
  // returned, never changed after.
  std::unique_ptr<gloo_internal::SyncAllreduce> sync_;
  // GlooSyncMaxBytes() when the group was made: every call of every member
  // chooses its route alike.
  size_t sync_max_bytes_ = gloo_internal::GlooSyncMaxBytes();
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_COMMUNICATOR_H_
