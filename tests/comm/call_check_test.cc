// devmesh/tests/comm/call_check_test.cc
// comm/call_check.h's pure parts: SameCall field by field, DescribeCall of
// every kind, CallMismatchError's two texts and payload, and the wire form
// and CompareCallRecords that composite groups use.
#include "comm/call_check.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/types/span.h"
#include "comm/error_info.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

CallRecord Call(CallKind kind, DataType dtype, uint64_t count,
                ReduceOp op = ReduceOp::kSum, int root = -1, int64_t seq = 3) {
  CallRecord r;
  r.seq = seq;
  r.kind = kind;
  r.dtype = dtype;
  r.count = count;
  r.op = op;
  r.root = root;
  return r;
}

TEST(CallCheck, SameCallComparesEveryField) {
  const CallRecord a = Call(CallKind::kBroadcast, DataType::kInt32, 4,
                            ReduceOp::kSum, 1);
  EXPECT_TRUE(SameCall(a, a));
  CallRecord b = a;
  b.seq = 4;
  EXPECT_FALSE(SameCall(a, b));
  b = a;
  b.kind = CallKind::kAllGather;
  EXPECT_FALSE(SameCall(a, b));
  b = a;
  b.dtype = DataType::kFloat32;
  EXPECT_FALSE(SameCall(a, b));
  b = a;
  b.count = 5;
  EXPECT_FALSE(SameCall(a, b));
  b = a;
  b.op = ReduceOp::kMax;
  EXPECT_FALSE(SameCall(a, b));
  b = a;
  b.root = 0;
  EXPECT_FALSE(SameCall(a, b));
}

TEST(CallCheck, DescribeCallOfEveryKind) {
  EXPECT_EQ(DescribeCall(Call(CallKind::kAllReduce, DataType::kBFloat16, 7,
                              ReduceOp::kAvg)),
            "allreduce bfloat16 x 7 avg");
  EXPECT_EQ(DescribeCall(Call(CallKind::kAllGather, DataType::kInt8, 2)),
            "allgather int8 x 2");
  EXPECT_EQ(DescribeCall(Call(CallKind::kReduceScatter, DataType::kFloat16, 3,
                              ReduceOp::kProd)),
            "reduce_scatter float16 x 3 prod");
  EXPECT_EQ(DescribeCall(Call(CallKind::kBroadcast, DataType::kUInt8, 9,
                              ReduceOp::kSum, 2)),
            "broadcast uint8 x 9 from root 2");
  EXPECT_EQ(DescribeCall(Call(CallKind::kAllToAll, DataType::kInt64, 1)),
            "alltoall int64 x 1");
  EXPECT_EQ(DescribeCall(Call(CallKind::kBarrier, DataType::kUInt8, 0)),
            "barrier");
  EXPECT_EQ(DescribeCall(Call(CallKind::kReduce, DataType::kInt32, 4,
                              ReduceOp::kMax, 1)),
            "reduce int32 x 4 max to root 1");
  EXPECT_EQ(DescribeCall(Call(CallKind::kGather, DataType::kFloat64, 5,
                              ReduceOp::kSum, 0)),
            "gather float64 x 5 to root 0");
  EXPECT_EQ(DescribeCall(Call(CallKind::kScatter, DataType::kInt8, 6,
                              ReduceOp::kSum, 3)),
            "scatter int8 x 6 from root 3");
  EXPECT_EQ(DescribeCall(Call(CallKind::kAllToAllV, DataType::kFloat32, 0)),
            "alltoallv float32");
  EXPECT_EQ(DescribeCall(CallRecord()), "no collective yet");
}

TEST(CallCheck, MismatchErrorTexts) {
  const std::vector<int> group = {4, 6};
  absl::Status s = CallMismatchError(
      "x", 4, Call(CallKind::kAllReduce, DataType::kFloat32, 8), 6,
      Call(CallKind::kAllReduce, DataType::kFloat64, 4), group);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "x call #3: the members' calls differ: global rank 6 called "
            "allreduce float64 x 4 sum, global rank 4 allreduce float32 x 8 "
            "sum (group of global ranks [4, 6]); the group refuses every "
            "later call");
  EXPECT_EQ(DisagreeingRank(s), 6);
  s = CallMismatchError(
      "x", 4, Call(CallKind::kBarrier, DataType::kUInt8, 0), 6,
      Call(CallKind::kBarrier, DataType::kUInt8, 0, ReduceOp::kSum, -1, 5),
      group);
  EXPECT_EQ(s.message(),
            "x: the members are at different collectives: global rank 6 at "
            "its #5 (barrier), global rank 4 at its #3 (barrier): a member "
            "skipped or added a collective (one the front rejected on it "
            "still counts) (group of global ranks [4, 6]); the group refuses "
            "every later call");
  EXPECT_EQ(DisagreeingRank(s), 6);
  EXPECT_EQ(DisagreeingRank(absl::InvalidArgumentError("no payload")), -1);
  // A label (CommOptions::label) follows the number, or the backend.
  s = CallMismatchError(
      "x", 4, Call(CallKind::kAllReduce, DataType::kFloat32, 8), 6,
      Call(CallKind::kAllReduce, DataType::kFloat64, 4), group,
      "mesh dim 'tp'");
  EXPECT_TRUE(absl::StartsWith(
      s.message(),
      "x call #3 along mesh dim 'tp': the members' calls differ: global "
      "rank 6 called"))
      << s;
  s = CallMismatchError(
      "x", 4, Call(CallKind::kBarrier, DataType::kUInt8, 0), 6,
      Call(CallKind::kBarrier, DataType::kUInt8, 0, ReduceOp::kSum, -1, 5),
      group, "mesh dim 'tp'");
  EXPECT_TRUE(absl::StartsWith(
      s.message(),
      "x along mesh dim 'tp': the members are at different collectives: "))
      << s;
}

TEST(CallCheck, WireFormKeepsEveryField) {
  const CallRecord a = Call(CallKind::kReduce, DataType::kFloat64, 1ull << 40,
                            ReduceOp::kMax, 5, 77);
  const CallRecordWire w = ToCallRecordWire(a);
  EXPECT_EQ(w.seq, 77);
  EXPECT_EQ(w.count, 1ull << 40);
  EXPECT_EQ(w.root, 5);
  EXPECT_TRUE(SameCall(FromCallRecordWire(w), a));
}

TEST(CallCheck, CompareCallRecordsNamesTheFirstThatDiffers) {
  const CallRecord a = Call(CallKind::kAllReduce, DataType::kFloat32, 8);
  const CallRecord b = Call(CallKind::kAllReduce, DataType::kFloat32, 9);
  std::vector<CallRecordWire> all = {ToCallRecordWire(a), ToCallRecordWire(a),
                                     ToCallRecordWire(b), ToCallRecordWire(b)};
  EXPECT_TRUE(CompareCallRecords("two_level", absl::MakeSpan(all).subspan(0, 2),
                                 {4, 6})
                  .ok());
  const absl::Status s =
      CompareCallRecords("two_level", all, {4, 6, 8, 10}, "mesh dim 'dp'");
  EXPECT_EQ(s, CallMismatchError("two_level", 4, a, 8, b, {4, 6, 8, 10},
                                 "mesh dim 'dp'"));
  EXPECT_EQ(GetErrorInfo(s).disagreeing, 8);
  // Without global ranks, group ranks stand for them.
  EXPECT_EQ(CompareCallRecords("x", all, {}),
            CallMismatchError("x", 0, a, 2, b, {}));
  EXPECT_TRUE(CompareCallRecords("x", {}, {}).ok());
}

}  // namespace
}  // namespace devmesh
