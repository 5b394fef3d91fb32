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
#include "tests/comm/enqueuing_backend.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Enqueuing;
using ::devmesh::testing::Gate;

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
