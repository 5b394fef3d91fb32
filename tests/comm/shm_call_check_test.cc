// devmesh/tests/comm/shm_call_check_test.cc
// The per-call check on the shared-memory backend (comm/call_check.h), in
// real processes: members that disagree on a collective's dtype (at equal
// bytes), count, op, root, kind or sequence number all get the same
// InvalidArgument, with the kDisagreementPayload naming the member that
// differed, at the call (not at the group's 60 s timeout, and never OK); and
// every later call of the group returns the same error.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

// What each rank calls: its collective on `c`, buffers its own. Each case's
// group first makes one matching all-reduce (its #1), so the mismatched call
// is #2.
using RankCall = absl::Status (*)(Communicator& c, int rank);

struct Case {
  const char* name;
  int ranks;
  RankCall call;
  const char* want;  // the message every rank gets
  int disagreeing;   // the payload's global rank
};

absl::Status Float32xN(Communicator& c, size_t n) {
  std::vector<float> x(n, 1.0f);
  return c.AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
}

absl::Status DtypeAtEqualBytes(Communicator& c, int rank) {
  if (rank == 0) return Float32xN(c, 8);
  std::vector<double> x(4, 1.0);
  return c.AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
}

absl::Status Count(Communicator& c, int rank) {
  return Float32xN(c, rank == 0 ? 8 : 4);
}

absl::Status BigCount(Communicator& c, int rank) {
  return Float32xN(c, rank == 0 ? 100000 : 200000);
}

absl::Status ZeroAgainstEight(Communicator& c, int rank) {
  return Float32xN(c, rank == 0 ? 8 : 0);
}

absl::Status Op(Communicator& c, int rank) {
  std::vector<int32_t> x(3, rank);
  return c.AllReduce(absl::MakeSpan(x),
                     rank == 0 ? ReduceOp::kSum : ReduceOp::kMax);
}

absl::Status Root(Communicator& c, int rank) {
  std::vector<uint8_t> x(3, 7);
  return c.Broadcast(absl::MakeSpan(x), /*root=*/rank == 0 ? 0 : 1);
}

absl::Status Kind(Communicator& c, int rank) {
  if (rank == 0) return Float32xN(c, 2);
  return c.Barrier();
}

absl::Status BlocksPerMember(Communicator& c, int rank) {
  // AllGather's count is per member: 2 against 3.
  const size_t n = rank == 0 ? 2 : 3;
  std::vector<int64_t> mine(n, rank), all(n * c.size());
  return c.AllGather(mine, absl::MakeSpan(all));
}

// Rank 1's first all-reduce is rejected by its own front (a null buffer),
// so its next one is its #2 while rank 0 is at #1.
absl::Status SkippedCall(Communicator& c, int rank) {
  if (rank == 1) {
    absl::Status rejected =
        c.AllReduce(nullptr, nullptr, 8, DataType::kFloat32, ReduceOp::kSum);
    if (!absl::IsInvalidArgument(rejected)) {
      return absl::InternalError(
          absl::StrCat("the null buffer was not rejected: ",
                       rejected.ToString()));
    }
  }
  return Float32xN(c, 8);
}

// Rank 1's first all-reduce is rejected by a typed form's length check,
// made through a wrapper (as a mesh group's guard is one): the backend's
// front still counts it, so rank 1's next all-reduce is its #3.
absl::Status TypedRejection(Communicator& c, int rank) {
  if (rank == 1) {
    ForwardingCommunicator view(
        std::shared_ptr<Communicator>(&c, [](Communicator*) {}));
    std::vector<float> three(3), four(4);
    absl::Status rejected =
        view.AllReduce(three, absl::MakeSpan(four), ReduceOp::kSum);
    if (!absl::IsInvalidArgument(rejected)) {
      return absl::InternalError(
          absl::StrCat("the lengths were not rejected: ", rejected.ToString()));
    }
  }
  return Float32xN(c, 8);
}

// Three members; rank 2 alone differs: every member names it.
absl::Status ThirdDiffers(Communicator& c, int rank) {
  return Float32xN(c, rank == 2 ? 5 : 6);
}

constexpr char kTail[] = "; the group refuses every later call";

const Case kCases[] = {
    {"dtype_at_equal_bytes", 2, DtypeAtEqualBytes,
     "shm call #2: the members' calls differ: global rank 1 called "
     "allreduce float64 x 4 sum, global rank 0 allreduce float32 x 8 sum "
     "(group of global ranks [0, 1])",
     1},
    {"count", 2, Count,
     "shm call #2: the members' calls differ: global rank 1 called "
     "allreduce float32 x 4 sum, global rank 0 allreduce float32 x 8 sum "
     "(group of global ranks [0, 1])",
     1},
    {"big_count", 2, BigCount,
     "shm call #2: the members' calls differ: global rank 1 called "
     "allreduce float32 x 200000 sum, global rank 0 allreduce float32 x "
     "100000 sum (group of global ranks [0, 1])",
     1},
    {"zero_against_eight", 2, ZeroAgainstEight,
     "shm call #2: the members' calls differ: global rank 1 called "
     "allreduce float32 x 0 sum, global rank 0 allreduce float32 x 8 sum "
     "(group of global ranks [0, 1])",
     1},
    {"op", 2, Op,
     "shm call #2: the members' calls differ: global rank 1 called "
     "allreduce int32 x 3 max, global rank 0 allreduce int32 x 3 sum "
     "(group of global ranks [0, 1])",
     1},
    {"root", 2, Root,
     "shm call #2: the members' calls differ: global rank 1 called "
     "broadcast uint8 x 3 from root 1, global rank 0 broadcast uint8 x 3 "
     "from root 0 (group of global ranks [0, 1])",
     1},
    {"kind", 2, Kind,
     "shm call #2: the members' calls differ: global rank 1 called barrier, "
     "global rank 0 allreduce float32 x 2 sum (group of global ranks "
     "[0, 1])",
     1},
    {"allgather_blocks", 2, BlocksPerMember,
     "shm call #2: the members' calls differ: global rank 1 called "
     "allgather int64 x 3, global rank 0 allgather int64 x 2 (group of "
     "global ranks [0, 1])",
     1},
    {"skipped_call", 2, SkippedCall,
     "shm: the members are at different collectives: global rank 1 at its "
     "#3 (allreduce float32 x 8 sum), global rank 0 at its #2 (allreduce "
     "float32 x 8 sum): a member skipped or added a collective (one the "
     "front rejected on it still counts) (group of global ranks [0, 1])",
     1},
    {"typed_rejection_through_a_wrapper", 2, TypedRejection,
     "shm: the members are at different collectives: global rank 1 at its "
     "#3 (allreduce float32 x 8 sum), global rank 0 at its #2 (allreduce "
     "float32 x 8 sum): a member skipped or added a collective (one the "
     "front rejected on it still counts) (group of global ranks [0, 1])",
     1},
    {"third_differs", 3, ThirdDiffers,
     "shm call #2: the members' calls differ: global rank 2 called "
     "allreduce float32 x 5 sum, global rank 0 allreduce float32 x 6 sum "
     "(group of global ranks [0, 1, 2])",
     2},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ShmCallCheckTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShmCallCheckTest, EveryMemberGetsTheSameErrorAtTheCall) {
  const Case& c = GetParam();
  const std::string want = absl::StrCat(c.want, kTail);
  absl::Status status = ForkRanks(c.ranks, [&](int rank, int size,
                                               std::shared_ptr<Store> store) {
    CommOptions options;
    options.timeout = absl::Seconds(60);
    DEVMESH_ASSIGN_OR_RETURN(
        auto comm, CreateCommunicator("shm", store, rank, size, options));
    // One matching call first: the check passes calls that agree.
    std::vector<int32_t> one = {rank + 1};
    DEVMESH_RETURN_IF_ERROR(comm->AllReduce(absl::MakeSpan(one),
                                            ReduceOp::kSum));
    if (one[0] != size * (size + 1) / 2) {
      return absl::InternalError(absl::StrCat("sum ", one[0]));
    }
    const absl::Time start = absl::Now();
    absl::Status got = c.call(*comm, rank);
    const absl::Duration took = absl::Now() - start;
    const std::string& expected = want;
    if (!absl::IsInvalidArgument(got) || got.message() != expected) {
      return absl::InternalError(absl::StrCat("got ", got.ToString(),
                                              "\nwant ", expected));
    }
    if (DisagreeingRank(got) != c.disagreeing) {
      return absl::InternalError(
          absl::StrCat("payload names ", DisagreeingRank(got)));
    }
    if (took > absl::Seconds(10)) {
      return absl::InternalError(
          absl::StrCat("found after ", absl::FormatDuration(took)));
    }
    // The group refuses every later call with the same error.
    absl::Status later = comm->AllReduce(absl::MakeSpan(one), ReduceOp::kSum);
    if (later != got) {
      return absl::InternalError(absl::StrCat("later: ", later.ToString()));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(
    Mismatches, ShmCallCheckTest, ::testing::ValuesIn(kCases),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.name);
    });

// ShmOptions::check_calls is group rank 0's for the whole group: a member
// that asks for no check still gets the error, as rank 0 does.
TEST(ShmCallCheckOptionTest, RankZerosSettingIsTheGroups) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    CommOptions options;
    options.timeout = absl::Seconds(60);
    ShmOptions shm;
    shm.require = true;
    shm.check_calls = rank == 0;
    DEVMESH_ASSIGN_OR_RETURN(
        auto comm, CreateShmGroup(store, rank, size, options, shm));
    absl::Status got = Count(*comm, rank);
    if (!absl::IsInvalidArgument(got) || DisagreeingRank(got) != 1) {
      return absl::InternalError(absl::StrCat("got ", got.ToString()));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A step that times out leaves the member that timed out ahead of the late
// one; it refuses every later call, so its next call's data never meets the
// late member's rounds. 512 KiB all-reduces take 4 steps (two rounds of the
// two-step algorithm): rank 0 times out at the first, retries and is
// refused; rank 1, late, passes the first step and times out at the second
// (before, rank 0's retry met it there and rank 1 returned OK with rank 0's
// second call mixed into its sum).
TEST(ShmStepTimeoutTest, TheMemberThatTimedOutTakesNoMoreSteps) {
  absl::Status status =
      ForkRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
        CommOptions options;
        options.timeout = absl::Seconds(1);
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("shm", store, rank, size, options));
        std::vector<float> x(128 << 10, rank == 0 ? 1.0f : 2.0f);
        if (rank == 1) {
          absl::SleepFor(absl::Milliseconds(1500));
          absl::Status late =
              comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
          if (late.ok()) {
            return absl::InternalError(absl::StrCat(
                "the late member's all-reduce returned OK (x[0] = ", x[0],
                ", x[last] = ", x.back(), ")"));
          }
          return absl::IsDeadlineExceeded(late)
                     ? absl::OkStatus()
                     : absl::InternalError(late.ToString());
        }
        absl::Status first = comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        if (!absl::IsDeadlineExceeded(first)) {
          return absl::InternalError(absl::StrCat("first: ", first.ToString()));
        }
        std::fill(x.begin(), x.end(), 100.0f);
        absl::Status retry = comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        if (!absl::IsFailedPrecondition(retry) ||
            !absl::StrContains(retry.message(),
                               "refused: an earlier step of this group timed "
                               "out")) {
          return absl::InternalError(absl::StrCat("retry: ", retry.ToString()));
        }
        absl::SleepFor(absl::Seconds(2));  // rank 1 ends first
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
