// devmesh/tests/comm/communicator_front_test.cc
// The Communicator front (comm/communicator.h): every argument error with its
// exact message, found before the backend sees the call; the call count;
// and ForwardingCommunicator (comm/forwarding_communicator.h): a wrapper's
// calls reach the inner front, which checks and counts them once, and
// Intercept sees each primitive by its kind.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

// A backend that records which Do* ran and returns OK.
class Recorder final : public Communicator {
 public:
  Recorder(int rank, int size) : rank_(rank), global_(size) {
    for (int r = 0; r < size; ++r) global_[r] = 10 * r;
  }
  absl::string_view backend() const override { return "rec"; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(global_.size()); }
  const std::vector<int>& global_ranks() const override { return global_; }

  std::vector<std::string> ran;
  std::vector<CallRecord> records;  // current_call() in each collective

 protected:
  absl::Status DoAllReduce(const void*, void*, size_t, DataType,
                           ReduceOp) override {
    return Ran("allreduce", /*collective=*/true);
  }
  absl::Status DoAllGather(const void*, void*, size_t, DataType) override {
    return Ran("allgather", /*collective=*/true);
  }
  absl::Status DoReduceScatter(const void*, void*, size_t, DataType,
                               ReduceOp) override {
    return Ran("reduce_scatter", /*collective=*/true);
  }
  absl::Status DoBroadcast(const void*, void*, size_t, DataType,
                           int) override {
    return Ran("broadcast", /*collective=*/true);
  }
  absl::Status DoAllToAll(const void*, void*, size_t, DataType) override {
    return Ran("alltoall", /*collective=*/true);
  }
  absl::Status DoSend(const void*, size_t, DataType, int) override {
    return Ran("send");
  }
  absl::Status DoRecv(void*, size_t, DataType, int) override {
    return Ran("recv");
  }
  absl::Status DoBarrier() override {
    return Ran("barrier", /*collective=*/true);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int, int, const SplitOptions&) override {
    (void)Ran("split");
    return std::unique_ptr<Communicator>();
  }
  absl::Status DoAbort() override { return Ran("abort"); }

 private:
  absl::Status Ran(std::string what, bool collective = false) {
    ran.push_back(std::move(what));
    if (collective) records.push_back(current_call());
    return absl::OkStatus();
  }
  int rank_;
  std::vector<int> global_;
};

std::string Invalid(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument) {
    return "not InvalidArgument: " + s.ToString();
  }
  return std::string(s.message());
}

TEST(CommunicatorFront, EveryArgumentErrorIsTheFrontsAndReachesNoBackend) {
  Recorder c(/*rank=*/1, /*size=*/3);
  float x[6] = {};
  const auto bad_dtype = static_cast<DataType>(42);
  const auto bad_op = static_cast<ReduceOp>(9);
  EXPECT_EQ(Invalid(c.AllReduce(nullptr, x, 4, DataType::kFloat32,
                                ReduceOp::kSum)),
            "rec allreduce: send buffer is null with count 4");
  EXPECT_EQ(Invalid(c.AllReduce(x, nullptr, 4, DataType::kFloat32,
                                ReduceOp::kSum)),
            "rec allreduce: recv buffer is null with count 4");
  EXPECT_EQ(Invalid(c.AllReduce(x, x, 1, bad_dtype, ReduceOp::kSum)),
            "rec allreduce: invalid dtype value 42");
  EXPECT_EQ(Invalid(c.AllReduce(x, x, 1, DataType::kFloat32, bad_op)),
            "rec allreduce: invalid ReduceOp value 9");
  EXPECT_EQ(Invalid(c.AllGather(x, nullptr, 2, DataType::kInt64)),
            "rec allgather: recv buffer is null with count 2");
  EXPECT_EQ(Invalid(c.AllGather(x, x, SIZE_MAX / 8, DataType::kFloat64)),
            "rec allgather: count 2305843009213693951 x 3 blocks of float64 "
            "overflows the byte count");
  EXPECT_EQ(Invalid(c.ReduceScatter(nullptr, x, 1, DataType::kFloat32,
                                    ReduceOp::kMax)),
            "rec reduce_scatter: send buffer is null with count 1");
  EXPECT_EQ(Invalid(c.ReduceScatter(x, x, 1, DataType::kFloat32, bad_op)),
            "rec reduce_scatter: invalid ReduceOp value 9");
  EXPECT_EQ(Invalid(c.Broadcast(x, x, 1, DataType::kFloat32, 3)),
            "rec broadcast: root 3 is outside [0, 3)");
  EXPECT_EQ(Invalid(c.Broadcast(x, x, 1, DataType::kFloat32, -1)),
            "rec broadcast: root -1 is outside [0, 3)");
  EXPECT_EQ(Invalid(c.Broadcast(x, nullptr, 1, DataType::kFloat32, 0)),
            "rec broadcast: recv buffer is null with count 1");
  // This rank (1) is the root: its send is checked.
  EXPECT_EQ(Invalid(c.Broadcast(nullptr, x, 1, DataType::kFloat32, 1)),
            "rec broadcast: send buffer is null with count 1");
  EXPECT_EQ(Invalid(c.AllToAll(x, nullptr, 2, DataType::kUInt8)),
            "rec alltoall: recv buffer is null with count 2");
  EXPECT_EQ(Invalid(c.Send(x, 1, DataType::kFloat32, 1)),
            "rec send: peer 1 is this rank");
  EXPECT_EQ(Invalid(c.Send(x, 1, DataType::kFloat32, 5)),
            "rec send: peer 5 is outside [0, 3)");
  EXPECT_EQ(Invalid(c.Send(nullptr, 1, DataType::kFloat32, 0)),
            "rec send: send buffer is null with count 1");
  EXPECT_EQ(Invalid(c.Recv(x, 1, DataType::kFloat32, -2)),
            "rec recv: peer -2 is outside [0, 3)");
  EXPECT_EQ(Invalid(c.Recv(nullptr, 1, bad_dtype, 2)),
            "rec recv: invalid dtype value 42");
  EXPECT_EQ(Invalid(c.Split(-2, 0).status()),
            "rec split: color -2 must be >= 0 or kNoColor (-1)");
  SplitOptions zero;
  zero.timeout = absl::ZeroDuration();
  EXPECT_EQ(Invalid(c.Split(0, 0, zero).status()),
            "rec split: timeout (0) must be positive");
  EXPECT_TRUE(c.ran.empty());
  // Rejected collectives still count (a member that skipped one is then
  // seen by the per-call check); the 5 Sends and Recvs and the 2 Splits do not.
  EXPECT_EQ(c.calls(), 13);
}

TEST(CommunicatorFront, ValidCallsReachTheBackendAndAreCounted) {
  Recorder c(/*rank=*/0, /*size=*/2);
  float x[4] = {};
  // Null buffers with count 0, a non-root's null send: valid.
  EXPECT_TRUE(
      c.AllReduce(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kAvg)
          .ok());
  EXPECT_TRUE(c.AllGather(x, x, 2, DataType::kFloat32).ok());
  EXPECT_TRUE(
      c.ReduceScatter(x, x, 2, DataType::kFloat32, ReduceOp::kProd).ok());
  EXPECT_TRUE(c.Broadcast(nullptr, x, 4, DataType::kFloat32, 1).ok());
  EXPECT_TRUE(c.AllToAll(x, x, 2, DataType::kFloat32).ok());
  EXPECT_TRUE(c.Send(x, 4, DataType::kFloat32, 1).ok());
  EXPECT_TRUE(c.Recv(x, 4, DataType::kFloat32, 1).ok());
  EXPECT_TRUE(c.Barrier().ok());
  EXPECT_EQ(c.calls(), 6);  // Send and Recv are not counted
  ASSERT_TRUE(c.Split(kNoColor, 0).ok());
  EXPECT_TRUE(c.Abort().ok());
  EXPECT_EQ(c.calls(), 6);
  EXPECT_EQ(c.ran,
            (std::vector<std::string>{"allreduce", "allgather",
                                      "reduce_scatter", "broadcast",
                                      "alltoall", "send", "recv", "barrier",
                                      "split", "abort"}));
  // The record each collective's backend saw.
  ASSERT_EQ(c.records.size(), 6u);
  auto expect = [&](size_t i, CallKind kind, DataType dtype, ReduceOp op,
                    int root, uint64_t count) {
    const CallRecord& r = c.records[i];
    EXPECT_EQ(r.seq, static_cast<int64_t>(i + 1)) << i;
    EXPECT_EQ(r.kind, kind) << i;
    EXPECT_EQ(r.dtype, dtype) << i;
    EXPECT_EQ(r.op, op) << i;
    EXPECT_EQ(r.root, root) << i;
    EXPECT_EQ(r.count, count) << i;
  };
  expect(0, CallKind::kAllReduce, DataType::kFloat32, ReduceOp::kAvg, -1, 0);
  expect(1, CallKind::kAllGather, DataType::kFloat32, ReduceOp::kSum, -1, 2);
  expect(2, CallKind::kReduceScatter, DataType::kFloat32, ReduceOp::kProd, -1,
         2);
  expect(3, CallKind::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 1, 4);
  expect(4, CallKind::kAllToAll, DataType::kFloat32, ReduceOp::kSum, -1, 2);
  expect(5, CallKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, 0);
}

TEST(CommunicatorFront, CallKindNames) {
  EXPECT_EQ(CallKindName(CallKind::kAllReduce), "allreduce");
  EXPECT_EQ(CallKindName(CallKind::kAllGather), "allgather");
  EXPECT_EQ(CallKindName(CallKind::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(CallKindName(CallKind::kBroadcast), "broadcast");
  EXPECT_EQ(CallKindName(CallKind::kAllToAll), "alltoall");
  EXPECT_EQ(CallKindName(CallKind::kSend), "send");
  EXPECT_EQ(CallKindName(CallKind::kRecv), "recv");
  EXPECT_EQ(CallKindName(CallKind::kBarrier), "barrier");
}

// A wrapper that records the kinds it intercepts and can refuse them.
class Refuser final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  std::vector<CallKind> seen;
  bool refuse = false;

 protected:
  absl::Status Intercept(CallKind kind,
                         absl::FunctionRef<absl::Status()> call) override {
    seen.push_back(kind);
    if (refuse) return absl::UnavailableError("refused");
    return call();
  }
};

TEST(ForwardingCommunicator, ForwardsToTheInnerFrontWhichChecksOnce) {
  auto inner = std::make_shared<Recorder>(/*rank=*/1, /*size=*/2);
  Refuser outer(inner);
  EXPECT_EQ(outer.backend(), "rec");
  EXPECT_EQ(outer.rank(), 1);
  EXPECT_EQ(outer.size(), 2);
  EXPECT_EQ(outer.global_ranks(), (std::vector<int>{0, 10}));
  EXPECT_EQ(outer.inner(), inner.get());
  std::vector<int32_t> v = {1, 2};
  ASSERT_TRUE(outer.AllReduce(absl::MakeSpan(v), ReduceOp::kSum).ok());
  ASSERT_TRUE(outer.Send(absl::MakeConstSpan(v), /*peer=*/0).ok());
  ASSERT_TRUE(outer.Barrier().ok());
  // A bad argument: the wrapper sees the call, the inner front rejects it
  // with the backend's name, and the backend never runs it.
  EXPECT_EQ(Invalid(outer.Recv(absl::MakeSpan(v), /*peer=*/1)),
            "rec recv: peer 1 is this rank");
  EXPECT_EQ(outer.calls(), 2);  // the all-reduce and the barrier
  EXPECT_EQ(inner->calls(), 2);
  EXPECT_EQ(inner->ran,
            (std::vector<std::string>{"allreduce", "send", "barrier"}));
  EXPECT_EQ(outer.seen,
            (std::vector<CallKind>{CallKind::kAllReduce, CallKind::kSend,
                                   CallKind::kBarrier, CallKind::kRecv}));
  // Refused in Intercept: the inner never sees it.
  outer.refuse = true;
  std::vector<int32_t> all(4);
  EXPECT_EQ(outer.AllGather(v, absl::MakeSpan(all)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(outer.calls(), 3);
  EXPECT_EQ(inner->calls(), 2);
  // Split and Abort go straight to the inner front.
  auto child = outer.Split(-2, 0);
  EXPECT_EQ(Invalid(child.status()),
            "rec split: color -2 must be >= 0 or kNoColor (-1)");
  EXPECT_TRUE(outer.Abort().ok());
  EXPECT_EQ(inner->ran.back(), "abort");
}

// The plain base is a view: a Communicator owning a share of another.
TEST(ForwardingCommunicator, APlainOneIsAView) {
  auto inner = std::make_shared<Recorder>(/*rank=*/0, /*size=*/1);
  std::unique_ptr<Communicator> view =
      std::make_unique<ForwardingCommunicator>(inner);
  std::vector<float> v = {1.0f};
  ASSERT_TRUE(view->AllReduce(absl::MakeSpan(v), ReduceOp::kMin).ok());
  view.reset();
  EXPECT_EQ(inner->ran, (std::vector<std::string>{"allreduce"}));
}

}  // namespace
}  // namespace devmesh
