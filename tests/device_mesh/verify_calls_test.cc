// devmesh/tests/device_mesh/verify_calls_test.cc
// GroupOptions::verify_calls on Gloo groups, where it is on unless the
// options say false (the path NCCL groups take with verify_calls = true):
// agreeing calls give exact results; members whose calls differ (dtype at
// equal bytes, count, a big count, op, root, kind) all fail at once with the
// same InvalidArgument naming the differing member, and the group refuses
// every later call. false leaves a whole-world Gloo dim on the world
// communicator, unverified. Real processes (RunRanks); each case --verify_runs
// times (CI: 2).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/error_info.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

ABSL_FLAG(int, verify_runs, 2, "launches of each case");

namespace devmesh {
namespace {

using ::devmesh::testing::Expect;
using ::devmesh::testing::RunRanks;
using ::devmesh::testing::RuntimeOf;

// Gloo groups, verify_calls unset: verified by default.
MeshOptions Gloo() {
  MeshOptions options;
  options.all.backend = "gloo";
  options.all.timeout = absl::Seconds(60);
  return options;
}

MeshOptions Verified() {
  MeshOptions options = Gloo();
  options.all.verify_calls = true;
  return options;
}

TEST(VerifyCalls, AgreeingCallsGiveExactResults) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(
        mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}, Gloo()));
    ASSIGN_OR_RETURN(tp, mesh.GetGroup("tp"));
    ASSIGN_OR_RETURN(dp, mesh.GetGroup("dp"));
    RETURN_IF_ERROR(Expect(tp->backend() == "gloo", "backend"));
    for (int step = 0; step < 3; ++step) {
      std::vector<int64_t> x(1000, b.rank() + step);
      RETURN_IF_ERROR(tp->AllReduce(x.data(), x.data(), x.size(),
                                    DataType::kInt64, ReduceOp::kSum));
      const int64_t want = (b.rank() < 2 ? 1 : 5) + 2 * step;
      for (int64_t v : x) {
        RETURN_IF_ERROR(Expect(v == want, absl::StrCat("tp sum ", v)));
      }
      int32_t mine = b.rank(), both[2] = {-1, -1};
      RETURN_IF_ERROR(dp->AllGather(&mine, both, 1, DataType::kInt32));
      RETURN_IF_ERROR(
          Expect(both[0] == b.rank() % 2 && both[1] == b.rank() % 2 + 2,
                 absl::StrCat("dp gather ", both[0], both[1])));
    }
    // Send and Recv are not checked and still work.
    int32_t v = 7 * b.rank();
    if (b.rank() % 2 == 0) return tp->Send(&v, 1, DataType::kInt32, 1);
    RETURN_IF_ERROR(tp->Recv(&v, 1, DataType::kInt32, 0));
    return Expect(v == 7 * (b.rank() - 1), absl::StrCat("recv ", v));
  });
  EXPECT_TRUE(s.ok()) << s;
}

struct Case {
  const char* name;
  // Rank r's first collective on the 2-member group `w`.
  absl::Status (*call)(Communicator& w, int r);
  const char* want;  // rank 1's and rank 0's calls, as the error names them
};

absl::Status AllReduceOf(Communicator& w, DataType dtype, size_t count,
                         ReduceOp op) {
  std::vector<char> buf(count * DataTypeSize(dtype), 0);
  return w.AllReduce(buf.data(), buf.data(), count, dtype, op);
}

const Case kCases[] = {
    {"DtypeAtEqualBytes",
     [](Communicator& w, int r) {
       return r == 1 ? AllReduceOf(w, DataType::kFloat64, 4, ReduceOp::kSum)
                     : AllReduceOf(w, DataType::kFloat32, 8, ReduceOp::kSum);
     },
     "global rank 1 called allreduce float64 x 4 sum, global rank 0 "
     "allreduce float32 x 8 sum"},
    {"BigCount",
     [](Communicator& w, int r) {
       return AllReduceOf(w, DataType::kFloat32, r == 1 ? 200000 : 100000,
                          ReduceOp::kSum);
     },
     "global rank 1 called allreduce float32 x 200000 sum, global rank 0 "
     "allreduce float32 x 100000 sum"},
    {"Op",
     [](Communicator& w, int r) {
       return AllReduceOf(w, DataType::kInt32, 16,
                          r == 1 ? ReduceOp::kMax : ReduceOp::kSum);
     },
     "global rank 1 called allreduce int32 x 16 max, global rank 0 "
     "allreduce int32 x 16 sum"},
    {"Root",
     [](Communicator& w, int r) {
       std::vector<int32_t> buf(4, r);
       return w.Broadcast(buf.data(), buf.data(), buf.size(), DataType::kInt32,
                          r == 1 ? 1 : 0);
     },
     "global rank 1 called broadcast int32 x 4 from root 1, global rank 0 "
     "broadcast int32 x 4 from root 0"},
    {"Kind",
     [](Communicator& w, int r) {
       if (r == 1) return w.Barrier();
       return AllReduceOf(w, DataType::kInt32, 1, ReduceOp::kSum);
     },
     "global rank 1 called barrier, global rank 0 allreduce int32 x 1 sum"},
};

class VerifyCallsMismatch : public ::testing::TestWithParam<Case> {};

TEST_P(VerifyCallsMismatch, EveryMemberFailsAtOnceWithTheSameError) {
  const Case& c = GetParam();
  const std::string want = absl::StrCat(
      "gloo verify call #2 along mesh dim 'w': the members' "
      "calls differ: ",
      c.want,
      " (group of global ranks [0, 1]); the group refuses every "
      "later call");
  for (int run = 0; run < absl::GetFlag(FLAGS_verify_runs); ++run) {
    absl::Status s = RunRanks(2, [&](Bootstrap& b) -> absl::Status {
      ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
      ASSIGN_OR_RETURN(mesh,
                       InitDeviceMesh(runtime, "cpu", {2}, {"w"}, Gloo()));
      ASSIGN_OR_RETURN(w, mesh.GetGroup("w"));
      // A first call that agrees.
      int32_t x = 1;
      RETURN_IF_ERROR(
          w->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum));
      RETURN_IF_ERROR(Expect(x == 2, "first sum"));
      const absl::Time start = absl::Now();
      absl::Status got = c.call(*w, b.rank());
      const absl::Duration took = absl::Now() - start;
      RETURN_IF_ERROR(
          Expect(absl::IsInvalidArgument(got) && got.message() == want,
                 absl::StrCat("got ", got.ToString(), "\nwant ", want)));
      RETURN_IF_ERROR(
          Expect(GetErrorInfo(got).disagreeing == 1, "disagreement payload"));
      RETURN_IF_ERROR(
          Expect(took < absl::Seconds(10),
                 absl::StrCat("took ", absl::FormatDuration(took))));
      // Sticky: a later, agreeing call is refused with the same error.
      absl::Status later =
          w->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum);
      return Expect(later == got, absl::StrCat("later: ", later.ToString()));
    });
    EXPECT_TRUE(s.ok()) << c.name << " run " << run << ": " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, VerifyCallsMismatch,
                         ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// A Gloo dim over the whole world is a verified group of its own by
// default (a mismatch is found, as above), the world communicator with
// verify_calls = false; explicit true is verified too.
TEST(VerifyCalls, GlooWorldDimIsVerifiedUnlessFalse) {
  absl::Status s = RunRanks(2, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    for (int mode = 0; mode < 3; ++mode) {
      MeshOptions options = Gloo();
      if (mode == 1) options.all.verify_calls = false;
      if (mode == 2) options.all.verify_calls = true;
      ASSIGN_OR_RETURN(mesh,
                       InitDeviceMesh(runtime, "cpu", {2}, {"w"}, options));
      ASSIGN_OR_RETURN(w, mesh.GetGroup("w"));
      RETURN_IF_ERROR(Expect(w->backend() == "gloo", "backend"));
      RETURN_IF_ERROR(
          Expect(runtime->IsWorldCommunicator(w.get()) == (mode == 1),
                 absl::StrCat("mode ", mode, ": world communicator ",
                              runtime->IsWorldCommunicator(w.get()))));
      int32_t x = b.rank() + 1;
      RETURN_IF_ERROR(
          w->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum));
      RETURN_IF_ERROR(Expect(x == 3, absl::StrCat("mode ", mode, " sum ", x)));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

// A mesh's shared-memory groups check every call without verify_calls, and
// their error names the mesh dim too.
TEST(VerifyCalls, ShmGroupsCheckAndNameTheirDim) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    options.all.backend = "shm";
    options.all.timeout = absl::Seconds(60);
    ASSIGN_OR_RETURN(
        mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}, options));
    ASSIGN_OR_RETURN(tp, mesh.GetGroup("tp"));
    const bool odd = b.rank() % 2 == 1;
    absl::Status got =
        AllReduceOf(*tp, odd ? DataType::kFloat64 : DataType::kFloat32,
                    odd ? 4 : 8, ReduceOp::kSum);
    const int other = b.rank() | 1, first = b.rank() & ~1;
    const std::string want = absl::StrCat(
        "shm call #1 along mesh dim 'tp': the members' calls differ: global "
        "rank ",
        other, " called allreduce float64 x 4 sum, global rank ", first,
        " allreduce float32 x 8 sum (group of global ranks [", first, ", ",
        other, "]); the group refuses every later call");
    return Expect(absl::IsInvalidArgument(got) && got.message() == want,
                  absl::StrCat("got ", got.ToString(), "\nwant ", want));
  });
  EXPECT_TRUE(s.ok()) << s;
}

// verify_calls is part of what the ranks agree on: a rank that turns it on
// alone fails every rank at InitDeviceMesh.
TEST(VerifyCalls, IsPartOfTheMeshAgreement) {
  absl::Status s = RunRanks(2, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options = Verified();
    if (b.rank() == 0) options.all.verify_calls.reset();
    auto mesh = InitDeviceMesh(runtime, "cpu", {2}, {"w"}, options);
    return Expect(absl::IsInvalidArgument(mesh.status()) &&
                      GetErrorInfo(mesh.status()).disagreeing == 1,
                  mesh.status().ToString());
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
