// devmesh/tests/comm/enqueuing_backend.h
// Test doubles for the I* path of a backend that starts its calls itself
// (Communicator::StartAsync, as NCCL does): Gate, a poll the test releases,
// and Enqueuing, a fake backend whose calls are "enqueued" on the caller's
// thread and whose Works end when the Gate says. CPU-only: they stand for
// NCCL's stream and event. Used by tests/comm:work_test and
// tests/device_mesh:guarded_async_test.
#ifndef DEVMESH_TESTS_COMM_ENQUEUING_BACKEND_H_
#define DEVMESH_TESTS_COMM_ENQUEUING_BACKEND_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/work.h"

namespace devmesh {
namespace testing {

// A poll that ends with `result` once `release` is set; counts its calls
// and whether two ever overlapped.
struct Gate {
  std::atomic<bool> release{false};
  std::atomic<int> polls{0};
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  absl::Status result;

  std::function<std::optional<absl::Status>()> Poll() {
    return [this]() -> std::optional<absl::Status> {
      if (inside.fetch_add(1) != 0) overlapped = true;
      polls.fetch_add(1);
      absl::SleepFor(absl::Microseconds(20));
      std::optional<absl::Status> r;
      if (release.load()) r = result;
      inside.fetch_sub(1);
      return r;
    };
  }
};

// A backend that, like NCCL, starts its I* calls itself: the call runs on
// the caller's thread in an enqueue-only mode, and its Work is polled.
class Enqueuing final : public Communicator {
 public:
  absl::string_view backend() const override { return "enq"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::vector<int>& global_ranks() const override { return global_; }

  std::vector<std::string> enqueued;  // the calls, in order
  std::vector<std::thread::id> threads;
  std::vector<bool> enqueue_only;  // per call: inside StartAsync?
  Gate gate;
  std::atomic<int> aborts{0};

 protected:
  bool StartsAsyncItself() const override { return true; }
  Work StartAsync(std::function<absl::Status()> call) override {
    in_start_ = true;
    absl::Status s = call();
    in_start_ = false;
    if (!s.ok()) return Work(std::move(s));
    return Work::FromPoll(gate.Poll());
  }
  absl::Status DoAllReduce(const void*, void*, size_t, DataType,
                           ReduceOp) override {
    return Note("allreduce");
  }
  absl::Status DoAllGather(const void*, void*, size_t, DataType) override {
    return Note("allgather");
  }
  absl::Status DoReduceScatter(const void*, void*, size_t, DataType,
                               ReduceOp) override {
    return Note("reduce_scatter");
  }
  absl::Status DoBroadcast(const void*, void*, size_t, DataType, int) override {
    return Note("broadcast");
  }
  absl::Status DoAllToAll(const void*, void*, size_t, DataType) override {
    return Note("alltoall");
  }
  absl::Status DoSend(const void*, size_t, DataType, int) override {
    return Note("send");
  }
  absl::Status DoRecv(void*, size_t, DataType, int) override {
    return Note("recv");
  }
  absl::Status DoBarrier() override { return Note("barrier"); }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int, int, const SplitOptions&) override {
    return absl::UnimplementedError("no split in this test");
  }
  // Ends every pending Work with FailedPrecondition, as NCCL's abort does.
  absl::Status DoAbort() override {
    aborts.fetch_add(1);
    if (!gate.release.load()) {
      gate.result = absl::FailedPreconditionError("enq: aborted");
      gate.release = true;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Note(std::string what) {
    enqueued.push_back(std::move(what));
    threads.push_back(std::this_thread::get_id());
    enqueue_only.push_back(in_start_);
    return absl::OkStatus();
  }
  std::vector<int> global_ = {0, 1};
  bool in_start_ = false;
};

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_COMM_ENQUEUING_BACKEND_H_
