// devmesh/device_mesh/guarded_communicator.h
// -----------------------------------------------------------------------------
// GuardedCommunicator: the Communicator a MeshRuntime hands out (mesh groups
// and world communicators). It forwards every call to the backend's
// communicator, and when a collective, Send, Recv or Barrier fails with
// Unavailable or DeadlineExceeded it returns FailureWatch::Explain of the
// error: the job's verdict on which rank died, the same on every survivor
// (device_mesh/failure_watch.h). Split's children are guarded too. The cost
// on success is one virtual call. inner() is the backend's communicator
// (benchmarks that look at Gloo's counters).
//
// Thread-safety: as the inner communicator's.
#ifndef DEVMESH_DEVICE_MESH_GUARDED_COMMUNICATOR_H_
#define DEVMESH_DEVICE_MESH_GUARDED_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "device_mesh/failure_watch.h"

namespace devmesh {

class GuardedCommunicator final : public Communicator {
 public:
  GuardedCommunicator(std::shared_ptr<Communicator> inner,
                      std::shared_ptr<FailureWatch> watch)
      : inner_(std::move(inner)), watch_(std::move(watch)) {}

  Communicator* inner() const { return inner_.get(); }

  absl::string_view backend() const override { return inner_->backend(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::vector<int>& global_ranks() const override {
    return inner_->global_ranks();
  }
  absl::Status AllReduce(const void* send, void* recv, size_t count,
                         DataType dtype, ReduceOp op) override {
    return Check(inner_->AllReduce(send, recv, count, dtype, op));
  }
  absl::Status AllGather(const void* send, void* recv, size_t count,
                         DataType dtype) override {
    return Check(inner_->AllGather(send, recv, count, dtype));
  }
  absl::Status ReduceScatter(const void* send, void* recv, size_t count,
                             DataType dtype, ReduceOp op) override {
    return Check(inner_->ReduceScatter(send, recv, count, dtype, op));
  }
  absl::Status Broadcast(const void* send, void* recv, size_t count,
                         DataType dtype, int root) override {
    return Check(inner_->Broadcast(send, recv, count, dtype, root));
  }
  absl::Status AllToAll(const void* send, void* recv, size_t count,
                        DataType dtype) override {
    return Check(inner_->AllToAll(send, recv, count, dtype));
  }
  absl::Status Send(const void* buf, size_t count, DataType dtype,
                    int peer) override {
    return Check(inner_->Send(buf, count, dtype, peer));
  }
  absl::Status Recv(void* buf, size_t count, DataType dtype,
                    int peer) override {
    return Check(inner_->Recv(buf, count, dtype, peer));
  }
  absl::Status Barrier() override { return Check(inner_->Barrier()); }
  using Communicator::Split;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(
      int color, int key, const SplitOptions& options) override {
    auto child = inner_->Split(color, key, options);
    if (!child.ok()) return Check(child.status());
    if (*child == nullptr || watch_ == nullptr) return child;
    std::shared_ptr<Communicator> shared(std::move(*child));
    watch_->Register(shared);
    return std::unique_ptr<Communicator>(
        new GuardedCommunicator(std::move(shared), watch_));
  }
  absl::Status Abort() override {
    aborted_.store(true);
    return inner_->Abort();
  }

 private:
  absl::Status Check(absl::Status s) {
    if (s.ok() || watch_ == nullptr) return s;
    if (aborted_.load()) return s;  // aborted here: nothing to explain
    if (absl::IsFailedPrecondition(s)) {
      // Aborted by the job's verdict: say which.
      const std::string verdict = watch_->verdict();
      if (verdict.empty()) return s;
      return absl::Status(s.code(), absl::StrCat(verdict, " -- this call: ",
                                                 s.message()));
    }
    return watch_->Explain(s, inner_->global_ranks());
  }

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<FailureWatch> watch_;
  std::atomic<bool> aborted_{false};
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_GUARDED_COMMUNICATOR_H_
