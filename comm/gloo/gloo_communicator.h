// devmesh/comm/gloo/gloo_communicator.h
// -----------------------------------------------------------------------------
// The Gloo backend of Communicator: host buffers, TCP transport, blocking
// calls. Rendezvous goes through the devmesh Store (GlooStore adapter); every
// rank's context connects a full mesh to the other ranks of its group.
//
// Creation: CreateGlooCommunicator connects the group under the store key
// prefix "gloo/". Split(color, key) all-gathers (color, key) over this group
// through Gloo (no store traffic), then connects the child over the prefix
// "<parent prefix>split/<n>/<color>/", n = how many Splits this
// communicator has done, so store keys and connections grow with the child
// group, not the world. Children share the parent's TCP device (one listener
// and one event-loop thread per process).
//
// Semantics: see comm/communicator.h. Every dtype and op is supported:
// float16/bfloat16 reduce in float32 and round back; integer sum/prod wrap;
// avg = sum then divide by size() (integers truncate toward zero).
// Timeouts: CommOptions::timeout bounds the store waits, connection set-up
// and each collective (gloo::Context::setTimeout).
//
// Thread-safety: one collective at a time per communicator (NCCL's rule);
// Abort may be called from any thread and makes the running call fail.
#ifndef DEVMESH_COMM_GLOO_GLOO_COMMUNICATOR_H_
#define DEVMESH_COMM_GLOO_GLOO_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bootstrap/store.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"

namespace devmesh {

// Connects rank `rank` of a `size`-rank Gloo group through `store`.
// Called by every rank of the group with the same size and options.
// Errors: InvalidArgument (store null, size < 1, rank outside [0, size),
// timeout not positive, global_ranks of the wrong length or with a negative
// or repeated rank); DeadlineExceeded (a peer did not arrive within the
// timeout); Unavailable (device or connection failure).
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options);

class GlooCommunicator final : public Communicator {
 public:
  // Connects a group over `store` under `prefix` on an existing `device`.
  // Arguments are assumed checked (CreateGlooCommunicator, Split).
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Connect(
      std::shared_ptr<Store> store, std::string prefix, int rank, int size,
      std::vector<int> global_ranks, const CommOptions& options,
      std::shared_ptr<::gloo::transport::Device> device);

  absl::string_view backend() const override { return "gloo"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& global_ranks() const override {
    return global_ranks_;
  }

  absl::Status AllReduce(const void* send, void* recv, size_t count,
                         DataType dtype, ReduceOp op) override;
  absl::Status AllGather(const void* send, void* recv, size_t count,
                         DataType dtype) override;
  absl::Status ReduceScatter(const void* send, void* recv, size_t count,
                             DataType dtype, ReduceOp op) override;
  absl::Status Broadcast(const void* send, void* recv, size_t count,
                         DataType dtype, int root) override;
  absl::Status AllToAll(const void* send, void* recv, size_t count,
                        DataType dtype) override;
  absl::Status Send(const void* buf, size_t count, DataType dtype,
                    int peer) override;
  absl::Status Recv(void* buf, size_t count, DataType dtype,
                    int peer) override;
  absl::Status Barrier() override;
  using Communicator::Split;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(
      int color, int key, const SplitOptions& options) override;
  absl::Status Abort() override;

  // The Gloo context, for benchmarks that call Gloo directly.
  const std::shared_ptr<::gloo::Context>& context() const { return context_; }
  // Store calls made while connecting this group (adapter round trips).
  int64_t store_round_trips() const { return store_round_trips_; }

 private:
  GlooCommunicator() = default;

  // FailedPrecondition after Abort.
  absl::Status CheckOpen(absl::string_view op) const;
  // InvalidArgument for a bad dtype, a null buffer with count > 0, or a
  // byte count that overflows size_t (`blocks` blocks of `count`).
  absl::Status CheckBuffer(absl::string_view op, absl::string_view name,
                           const void* ptr, size_t count, size_t blocks,
                           DataType dtype) const;
  absl::Status CheckOp(absl::string_view op, ReduceOp reduce) const;
  absl::Status CheckRank(absl::string_view op, absl::string_view name,
                         int rank) const;
  std::chrono::milliseconds timeout() const;

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
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_COMMUNICATOR_H_
