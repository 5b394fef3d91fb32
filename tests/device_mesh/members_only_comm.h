// devmesh/tests/device_mesh/members_only_comm.h
// -----------------------------------------------------------------------------
// MembersOnlyComm: a Communicator that knows only its backend name, rank and
// members, for tests of what DeviceMesh asks of a backend without running
// one: every collective returns Internal("... runs no collective"); Split
// returns the same unless a subclass overrides it; Abort counts its calls.
#ifndef DEVMESH_TESTS_DEVICE_MESH_MEMBERS_ONLY_COMM_H_
#define DEVMESH_TESTS_DEVICE_MESH_MEMBERS_ONLY_COMM_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator.h"

namespace devmesh {
namespace testing {

class MembersOnlyComm : public Communicator {
 public:
  MembersOnlyComm(std::string backend, int rank, std::vector<int> members)
      : backend_(std::move(backend)), rank_(rank), members_(std::move(members)) {}

  absl::string_view backend() const override { return backend_; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::vector<int>& global_ranks() const override { return members_; }

 protected:
  absl::Status DoAllReduce(const void*, void*, size_t, DataType,
                           ReduceOp) override {
    return None();
  }
  absl::Status DoAllGather(const void*, void*, size_t, DataType) override {
    return None();
  }
  absl::Status DoReduceScatter(const void*, void*, size_t, DataType,
                               ReduceOp) override {
    return None();
  }
  absl::Status DoBroadcast(const void*, void*, size_t, DataType, int) override {
    return None();
  }
  absl::Status DoAllToAll(const void*, void*, size_t, DataType) override {
    return None();
  }
  absl::Status DoSend(const void*, size_t, DataType, int) override {
    return None();
  }
  absl::Status DoRecv(void*, size_t, DataType, int) override { return None(); }
  absl::Status DoBarrier() override { return None(); }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int, int, const SplitOptions&) override {
    return None();
  }
  absl::Status DoAbort() override {
    ++aborts;
    return absl::OkStatus();
  }

 public:
  int aborts = 0;

 protected:
  absl::Status None() const {
    return absl::InternalError(
        absl::StrCat("the ", backend_, " test backend runs no collective"));
  }

 private:
  std::string backend_;
  int rank_;
  std::vector<int> members_;
};

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_DEVICE_MESH_MEMBERS_ONLY_COMM_H_
