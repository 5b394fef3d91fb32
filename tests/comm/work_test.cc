// devmesh/tests/comm/work_test.cc
// Work (comm/work.h) made by a backend with Work::FromPoll, and the I* path
// of a backend that starts its calls itself (Communicator::StartAsync, as
// NCCL does): the call is enqueued on the caller's thread, also through a
// ForwardingCommunicator, and its Work ends when the poll says so. CPU-only:
// the fake backend stands for NCCL's stream and event.
#include "comm/work.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

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

TEST(WorkFromPoll, EndsWhenThePollSaysAndNeverPollsAfter) {
  Gate gate;
  gate.result = absl::DataLossError("the poll's own status");
  Work w = Work::FromPoll(gate.Poll());
  EXPECT_FALSE(w.Test());
  absl::Status early = w.Wait(absl::Milliseconds(5));
  EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(early.message(), "the call is still running at the deadline");
  gate.release = true;
  Work copy = w;
  EXPECT_EQ(copy.Wait(), absl::DataLossError("the poll's own status"));
  const int polls = gate.polls.load();
  EXPECT_TRUE(w.Test());
  EXPECT_EQ(w.Wait(), absl::DataLossError("the poll's own status"));
  EXPECT_EQ(gate.polls.load(), polls);  // done: never polled again
}

TEST(WorkFromPoll, WaitersOnManyThreadsPollOneAtATimeAndAllSeeTheStatus) {
  Gate gate;
  gate.result = absl::OkStatus();
  Work w = Work::FromPoll(gate.Poll());
  std::vector<absl::Status> seen(4, absl::UnknownError("not waited"));
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] { seen[i] = w.Wait(absl::Seconds(30)); });
  }
  absl::SleepFor(absl::Milliseconds(20));
  gate.release = true;
  for (auto& t : waiters) t.join();
  for (const absl::Status& s : seen) EXPECT_EQ(s, absl::OkStatus());
  EXPECT_FALSE(gate.overlapped.load());
  EXPECT_GE(gate.polls.load(), 2);
}

TEST(WorkFromPoll, TestDoesNotWaitForAnotherThreadsPoll) {
  std::atomic<bool> polling{false};
  Work w = Work::FromPoll([&]() -> std::optional<absl::Status> {
    polling = true;
    absl::SleepFor(absl::Milliseconds(300));  // a slow poll (an abort)
    return absl::OkStatus();
  });
  std::thread waiter([&] { EXPECT_EQ(w.Wait(), absl::OkStatus()); });
  while (!polling) absl::SleepFor(absl::Milliseconds(1));
  const absl::Time start = absl::Now();
  EXPECT_FALSE(w.Test());  // the waiter's poll runs: not done yet
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  waiter.join();
  EXPECT_TRUE(w.Test());
}

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
  absl::Status DoAbort() override { return absl::OkStatus(); }

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

// What a mesh group's guard does: sees each call by its kind.
class Counting final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  std::vector<CallKind> seen;

 protected:
  absl::Status Intercept(CallKind kind,
                         absl::FunctionRef<absl::Status()> call) override {
    seen.push_back(kind);
    return call();
  }
};

TEST(SelfStartingBackend, ICallsAreEnqueuedOnTheCallersThreadAndPolled) {
  Enqueuing c;
  float x[4] = {1, 2, 3, 4};
  Work w = c.IAllReduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum);
  // Enqueued before IAllReduce returned, here, in the enqueue-only mode.
  ASSERT_EQ(c.enqueued, std::vector<std::string>{"allreduce"});
  EXPECT_EQ(c.threads[0], std::this_thread::get_id());
  EXPECT_TRUE(c.enqueue_only[0]);
  EXPECT_EQ(c.calls(), 1);
  EXPECT_FALSE(w.Test());
  c.gate.result = absl::OkStatus();
  c.gate.release = true;
  EXPECT_TRUE(w.Test());
  EXPECT_EQ(w.Wait(), absl::OkStatus());
  // A blocking call is not in the enqueue-only mode.
  ASSERT_TRUE(c.AllGather(x, x, 2, DataType::kFloat32).ok());
  EXPECT_FALSE(c.enqueue_only.back());
}

TEST(SelfStartingBackend, TheFrontsArgumentErrorEndsTheWorkAtOnce) {
  Enqueuing c;
  float x[4] = {};
  Work w = c.IAllReduce(nullptr, x, 4, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_TRUE(w.Test());
  absl::Status s = w.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "enq allreduce: send buffer is null with count 4");
  EXPECT_TRUE(c.enqueued.empty());
  EXPECT_EQ(c.gate.polls.load(), 0);
}

TEST(SelfStartingBackend, AWrapperHandsItsICallsToTheBackend) {
  auto inner = std::make_shared<Enqueuing>();
  Counting wrapper(inner);
  float x[4] = {1, 2, 3, 4};
  Work a = wrapper.IAllReduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum);
  Work b = wrapper.IBroadcast(x, x, 4, DataType::kFloat32, /*root=*/1);
  // Both enqueued on this thread, through the wrapper's Intercept, in
  // order, before the I* calls returned: no progress thread of the
  // wrapper's ran them.
  ASSERT_EQ(inner->enqueued,
            (std::vector<std::string>{"allreduce", "broadcast"}));
  EXPECT_EQ(wrapper.seen, (std::vector<CallKind>{CallKind::kAllReduce,
                                                 CallKind::kBroadcast}));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(inner->threads[i], std::this_thread::get_id());
    EXPECT_TRUE(inner->enqueue_only[i]);
  }
  EXPECT_EQ(wrapper.calls(), 2);
  EXPECT_EQ(inner->calls(), 2);
  inner->gate.result = absl::UnavailableError("peer gone");
  inner->gate.release = true;
  EXPECT_EQ(a.Wait(), absl::UnavailableError("peer gone"));
  EXPECT_EQ(b.Wait(), absl::UnavailableError("peer gone"));
}

}  // namespace
}  // namespace devmesh
