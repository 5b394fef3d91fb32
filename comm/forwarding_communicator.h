// devmesh/comm/forwarding_communicator.h
// -----------------------------------------------------------------------------
// ForwardingCommunicator: the one base for communicators that wrap another
// (a guard that refuses calls or explains errors, a unique_ptr view of a
// shared communicator). It forwards every call to the inner communicator's
// front, which checks the arguments and runs the backend; a subclass sees
// each collective, Send, Recv and Barrier in Intercept, and overrides DoSplit
// or DoAbort where it must.
//
//   class Logged final : public ForwardingCommunicator {
//    public:
//     using ForwardingCommunicator::ForwardingCommunicator;
//    protected:
//     absl::Status Intercept(CallKind kind,
//                            absl::FunctionRef<absl::Status()> call) override {
//       absl::Status s = call();
//       if (!s.ok()) LOG(ERROR) << CallKindName(kind) << ": " << s;
//       return s;
//     }
//   };
//
// Used as it is, it is a view: a Communicator that owns a share of `inner`.
//
// Thread-safety: as the inner communicator's.
#ifndef DEVMESH_COMM_FORWARDING_COMMUNICATOR_H_
#define DEVMESH_COMM_FORWARDING_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace devmesh {

class ForwardingCommunicator : public Communicator {
 public:
  // `inner` must not be null.
  explicit ForwardingCommunicator(std::shared_ptr<Communicator> inner)
      : Communicator(Forwarding{}), inner_(std::move(inner)) {}
  // A subclass whose destructor tears down what Intercept uses calls
  // StopAsync first in it.
  ~ForwardingCommunicator() override { StopAsync(); }

  absl::string_view backend() const override { return inner_->backend(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::vector<int>& global_ranks() const override {
    return inner_->global_ranks();
  }

  Communicator* inner() const { return inner_.get(); }
  const std::shared_ptr<Communicator>& inner_shared() const { return inner_; }

 protected:
  // Runs `call` (the inner communicator's `kind`); the default only runs it.
  virtual absl::Status Intercept(CallKind kind,
                                 absl::FunctionRef<absl::Status()> call) {
    (void)kind;
    return call();
  }

  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override {
    return Intercept(CallKind::kAllReduce, [&] {
      return inner_->AllReduce(send, recv, count, dtype, op);
    });
  }
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override {
    return Intercept(CallKind::kAllGather, [&] {
      return inner_->AllGather(send, recv, count, dtype);
    });
  }
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override {
    return Intercept(CallKind::kReduceScatter, [&] {
      return inner_->ReduceScatter(send, recv, count, dtype, op);
    });
  }
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override {
    return Intercept(CallKind::kBroadcast, [&] {
      return inner_->Broadcast(send, recv, count, dtype, root);
    });
  }
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override {
    return Intercept(CallKind::kAllToAll, [&] {
      return inner_->AllToAll(send, recv, count, dtype);
    });
  }
  absl::Status DoReduce(const void* send, void* recv, size_t count,
                        DataType dtype, ReduceOp op, int root) override {
    return Intercept(CallKind::kReduce, [&] {
      return inner_->Reduce(send, recv, count, dtype, op, root);
    });
  }
  absl::Status DoGather(const void* send, void* recv, size_t count,
                        DataType dtype, int root) override {
    return Intercept(CallKind::kGather, [&] {
      return inner_->Gather(send, recv, count, dtype, root);
    });
  }
  absl::Status DoScatter(const void* send, void* recv, size_t count,
                         DataType dtype, int root) override {
    return Intercept(CallKind::kScatter, [&] {
      return inner_->Scatter(send, recv, count, dtype, root);
    });
  }
  absl::Status DoAllToAllV(const void* send,
                           absl::Span<const size_t> send_counts,
                           absl::Span<const size_t> send_offsets, void* recv,
                           absl::Span<const size_t> recv_counts,
                           absl::Span<const size_t> recv_offsets,
                           DataType dtype) override {
    return Intercept(CallKind::kAllToAllV, [&] {
      return inner_->AllToAllV(send, send_counts, send_offsets, recv,
                               recv_counts, recv_offsets, dtype);
    });
  }
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override {
    return Intercept(CallKind::kSend,
                     [&] { return inner_->Send(buf, count, dtype, peer); });
  }
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override {
    return Intercept(CallKind::kRecv,
                     [&] { return inner_->Recv(buf, count, dtype, peer); });
  }
  absl::Status DoBatchSendRecv(absl::Span<const P2POp> ops) override {
    return Intercept(CallKind::kBatchSendRecv,
                     [&] { return inner_->BatchSendRecv(ops); });
  }
  absl::Status DoBarrier() override {
    return Intercept(CallKind::kBarrier, [&] { return inner_->Barrier(); });
  }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override {
    return inner_->Split(color, key, options);
  }
  absl::Status DoAbort() override { return inner_->Abort(); }
  // I* calls: on the inner backend's StartAsync when it starts them itself
  // (NCCL), else on this wrapper's own progress thread.
  bool StartsAsyncItself() const override {
    return inner_->StartsAsyncItself();
  }
  Work StartAsync(std::function<absl::Status()> call) override {
    if (inner_->StartsAsyncItself()) return inner_->StartAsync(std::move(call));
    return Communicator::StartAsync(std::move(call));
  }

 private:
  void NoteRejected(CallKind kind, DataType dtype) override {
    Communicator::NoteRejected(kind, dtype);
    inner_->NoteRejected(kind, dtype);
  }

  std::shared_ptr<Communicator> inner_;
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_FORWARDING_COMMUNICATOR_H_
