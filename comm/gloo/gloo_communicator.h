// devmesh/comm/gloo/gloo_communicator.h
// -----------------------------------------------------------------------------
// The Gloo backend of Communicator ("gloo"): host buffers over TCP,
// blocking calls, every dtype and op of comm/communicator.h (float16 and
// bfloat16 reduce in float32 and round back; integer sum/prod wrap; avg is
// sum then divide by size(), integers truncating toward zero). How it
// connects, routes and aborts is in docs/guides/cpu_transports.md ("Gloo
// across hosts").
//
// Creation (CreateGlooCommunicator, Split): through the devmesh Store under
// the prefix "gloo/" (a Split child: "<parent prefix>split/<n>/<color>/");
// 4 store round trips per rank for the world group and 6 per Split child,
// whatever the group size. It completes on every member before it returns
// on any (a store barrier among the new group, as PyTorch's new_group).
// Errors: DeadlineExceeded naming the global ranks that never came within
// CommOptions::timeout (one deadline for the whole call), Unavailable
// naming a peer whose connection failed. A group whose size is a power of
// two connects only log2(size) pairs at creation and the rest at the first
// call that needs them: that call may then return the connection's error
// (Unavailable or DeadlineExceeded, naming the peer), and every later call
// that needs those pairs returns the same error.
//
// Bounds (T = CommOptions::timeout): a collective, Send, Recv or Barrier
// ends at most T after its peers stop making progress, with
// DeadlineExceeded or Unavailable naming the peer. Abort, from any thread,
// fails the running call at once (FailedPrecondition) and the peers' calls
// on this group too; it never waits for peers, nor does destruction. These
// bounds assume the store answers (its own timeouts bound it otherwise).
//
// Send and Recv: the receiver compares the sender's dtype and count with
// its own call before taking the data; a mismatch returns InvalidArgument
// with kDisagreementPayload (the sender's global rank), receives nothing
// and leaves the pair usable; the Send returns OK. A count of 0 sends
// nothing, so a Recv of N against a Send of 0 waits for the timeout.
//
// Errors never escape as exceptions (gloo_status.h). A peer SIGKILLed while
// its connection is being set up fails that pair with Unavailable instead of
// aborting this process (gloo_accept_guard.h).
//
// Thread-safety: one call at a time per communicator (NCCL's rule); Abort
// may be called from any thread.
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
#include "sync/annotated_mutex.h"
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
