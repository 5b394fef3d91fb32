// devmesh/tests/device_mesh/guarded_async_test.cc
// A mesh group's guard (device_mesh/guarded_communicator.h) over a backend
// that starts its I* calls itself, as NCCL does (the fake of
// tests/comm/enqueuing_backend.h): the guard counts such a call in flight
// until its Work ends, a failure taints the group, the verdict refuses new
// calls and aborts the backend under a pending one, whose Work then ends
// with the verdict and the dead rank's payload; a Work may outlive its
// guard. CPU-only.
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/error_info.h"
#include "comm/work.h"
#include "device_mesh/failure_watch.h"
#include "device_mesh/guarded_communicator.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"
#include "tests/comm/enqueuing_backend.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Enqueuing;

TEST(GuardedAsyncTest, AStartedCallIsInFlightUntilItsWorkEnds) {
  auto inner = std::make_shared<Enqueuing>();
  auto guard = GuardedCommunicator::Make(inner, /*watch=*/nullptr);
  float x[4] = {1, 2, 3, 4};
  Work w = guard->IAllReduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_EQ(inner->enqueued.size(), 1u);
  EXPECT_TRUE(inner->enqueue_only[0]);
  EXPECT_EQ(guard->state().completed, 1);  // enqueued
  EXPECT_FALSE(guard->state().clean);      // still in flight
  EXPECT_EQ(guard->WaitForStarted(absl::Now() + absl::Milliseconds(5)), 1);
  EXPECT_FALSE(guard->state().clean);
  inner->gate.result = absl::OkStatus();
  inner->gate.release = true;
  EXPECT_EQ(w.Wait(absl::Seconds(10)), absl::OkStatus());
  EXPECT_TRUE(guard->state().clean);
  EXPECT_EQ(guard->state().completed, 1);
  EXPECT_EQ(guard->WaitForStarted(absl::Now()), 0);
}

TEST(GuardedAsyncTest, WaitForStartedEndsTheCallsItWaitsFor) {
  auto inner = std::make_shared<Enqueuing>();
  auto guard = GuardedCommunicator::Make(inner, /*watch=*/nullptr);
  float x[4] = {1, 2, 3, 4};
  Work a = guard->IAllReduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum);
  Work b = guard->IBroadcast(x, x, 4, DataType::kFloat32, /*root=*/0);
  EXPECT_FALSE(guard->state().clean);
  inner->gate.result = absl::OkStatus();
  inner->gate.release = true;
  // Nobody waits on the Works: Shrink's wait polls them to their end.
  EXPECT_EQ(guard->WaitForStarted(absl::Now() + absl::Seconds(10)), 0);
  EXPECT_TRUE(guard->state().clean);
  EXPECT_EQ(guard->state().completed, 2);
  EXPECT_TRUE(a.Test());
  EXPECT_TRUE(b.Test());
}

TEST(GuardedAsyncTest, AWorkThatFailsLaterTaintsTheGroup) {
  auto inner = std::make_shared<Enqueuing>();
  auto guard = GuardedCommunicator::Make(inner, /*watch=*/nullptr);
  float x[4] = {};
  Work w = guard->IAllGather(x, x, 2, DataType::kFloat32);
  inner->gate.result = absl::InternalError("enq: the stream failed");
  inner->gate.release = true;
  EXPECT_EQ(w.Wait(absl::Seconds(10)),
            absl::InternalError("enq: the stream failed"));
  EXPECT_FALSE(guard->state().clean);
  EXPECT_EQ(guard->state().completed, 1);  // its enqueue succeeded
}

TEST(GuardedAsyncTest, AnEnqueueErrorEndsTheWorkAtOnceAndIsNotInFlight) {
  auto inner = std::make_shared<Enqueuing>();
  auto guard = GuardedCommunicator::Make(inner, /*watch=*/nullptr);
  float x[4] = {};
  Work w = guard->IAllReduce(nullptr, x, 4, DataType::kFloat32,
                             ReduceOp::kSum);
  EXPECT_TRUE(w.Test());
  EXPECT_EQ(w.Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(inner->enqueued.empty());
  EXPECT_EQ(guard->WaitForStarted(absl::Now()), 0);
  EXPECT_EQ(inner->gate.polls.load(), 0);
}

TEST(GuardedAsyncTest, AWorkMayOutliveItsGuard) {
  auto inner = std::make_shared<Enqueuing>();
  float x[4] = {1, 2, 3, 4};
  Work w;
  {
    auto guard = GuardedCommunicator::Make(inner, /*watch=*/nullptr);
    w = guard->IAllReduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum);
  }
  inner->gate.result = absl::UnavailableError("enq: peer gone");
  inner->gate.release = true;
  EXPECT_EQ(w.Wait(absl::Seconds(10)),
            absl::UnavailableError("enq: peer gone"));
}

TEST(GuardedAsyncTest, AVerdictRefusesNewCallsAndAbortsAPendingOne) {
  auto inner = std::make_shared<Enqueuing>();
  auto guard = GuardedCommunicator::Make(inner, /*watch=*/nullptr);
  float x[4] = {};
  Work pending = guard->IAllReduce(x, x, 4, DataType::kFloat32,
                                   ReduceOp::kSum);
  // Rank 7 is not in this group, but a call is in flight: abort it.
  guard->OnVerdict(/*dead=*/7, "global rank 7 died", /*fenced=*/false);
  EXPECT_EQ(inner->aborts.load(), 1);
  absl::Status s = pending.Wait(absl::Seconds(10));
  EXPECT_EQ(s, absl::FailedPreconditionError("enq: aborted"));
  EXPECT_FALSE(guard->state().clean);
  Work refused = guard->IAllReduce(x, x, 4, DataType::kFloat32,
                                   ReduceOp::kSum);
  EXPECT_TRUE(refused.Test());
  absl::Status r = refused.Wait();
  EXPECT_EQ(r.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(r.message(), "global rank 7 died -- this call "
                                            "was refused"))
      << r;
  EXPECT_EQ(PeerRank(r), 7);
  EXPECT_EQ(inner->enqueued.size(), 1u);  // the refused call never reached it
}

// With a real failure watch: rank 1 of the group {0, 1} stops renewing its
// lease and lives on a host this kernel cannot see, so the silence alone
// makes it dead. The watch tells the guard, which aborts the backend under
// the pending Work: the Work ends with the job's verdict, Unavailable, and
// the dead rank's payload, as a blocking call would.
TEST(GuardedAsyncTest, APeersDeathEndsAPendingWorkWithTheVerdict) {
  constexpr absl::Duration kPeriod = absl::Milliseconds(50);
  constexpr absl::Duration kSilence = absl::Milliseconds(300);
  auto store = std::make_shared<InMemoryStore>();
  ASSERT_TRUE(store->Set(FailureWatch::ProcKey(1),
                         "another-boot-id|4026531836|4242|12345")
                  .ok());
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2,
                                   kPeriod, kSilence);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(store->Add(FailureWatch::LeaseKey(1), 1).ok());
    absl::SleepFor(kPeriod);
  }
  auto inner = std::make_shared<Enqueuing>();  // global ranks {0, 1}
  auto guard = GuardedCommunicator::Make(inner, watch);
  float x[4] = {};
  Work w = guard->IAllReduce(x, x, 4, DataType::kFloat32, ReduceOp::kSum);
  absl::Status s = w.Wait(absl::Seconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(PeerRank(s), 1) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), watch->verdict())) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "enq: aborted")) << s;
  EXPECT_EQ(inner->aborts.load(), 1);
  EXPECT_FALSE(guard->state().clean);
}

}  // namespace
}  // namespace devmesh
