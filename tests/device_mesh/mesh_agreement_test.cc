// devmesh/tests/device_mesh/mesh_agreement_test.cc
// InitDeviceMesh's agreement (device_mesh/mesh_agreement.h) in real
// processes: ranks that ask for another shape, dim names in another order,
// other per-dim options, another device type or another must-agree setting,
// or whose own checks fail, make every rank fail at once with the same
// error naming the first rank found to differ and the field (never a mesh
// that sums with the wrong partner, never a wait for the 300 s timeout); a
// rank that never calls InitDeviceMesh is a DeadlineExceeded that counts the
// ranks that came. Also the spec's encoding and comparison alone.
#include "device_mesh/mesh_agreement.h"

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/communicator.h"
#include "config/settings.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

namespace devmesh {
namespace {

using ::devmesh::device_mesh_internal::CompareMeshSpecs;
using ::devmesh::device_mesh_internal::DecodeMeshSpec;
using ::devmesh::device_mesh_internal::EncodeMeshSpec;
using ::devmesh::device_mesh_internal::InitDeviceMeshSpec;
using ::devmesh::device_mesh_internal::MeshSpec;
using ::devmesh::testing::Expect;
using ::devmesh::testing::RunRanks;
using ::devmesh::testing::RuntimeOf;

TEST(MeshSpec, EncodesAndComparesFieldByField) {
  MeshOptions options;
  options.per_dim["tp"].timeout = absl::Seconds(5);
  const MeshSpec a = InitDeviceMeshSpec("cpu", {2, 2}, {"dp", "tp"}, options);
  auto back = DecodeMeshSpec(EncodeMeshSpec(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  EXPECT_TRUE(CompareMeshSpecs(1, a, 0, a).ok());
  const MeshSpec b = InitDeviceMeshSpec("cpu", {2, 2}, {"tp", "dp"}, options);
  absl::Status s = CompareMeshSpecs(1, b, 0, a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "InitDeviceMesh: the ranks disagree on the mesh: global rank 1 "
            "asked for mesh dim names (tp, dp), global rank 0 for (dp, tp); "
            "every rank fails with this error");
  EXPECT_EQ(DisagreeingRank(s), 1);
  EXPECT_FALSE(DecodeMeshSpec("5:ab").ok());
  EXPECT_FALSE(DecodeMeshSpec("x").ok());
}

// What rank `rank` asks for, per case.
struct Ask {
  std::string device_type = "cpu";
  std::vector<int64_t> shape = {2, 2};
  std::vector<std::string> names = {"dp", "tp"};
  MeshOptions options;
};

struct Case {
  const char* name;
  Ask (*ask)(int rank);
  absl::StatusCode code;
  const char* want;  // every rank's message
  int disagreeing;
};

Ask ShapeOfRank3(int rank) {
  Ask a;
  if (rank == 3) a.shape = {4, 1};
  return a;
}
Ask NamesOfRank1(int rank) {
  Ask a;
  if (rank == 1) a.names = {"tp", "dp"};
  return a;
}
Ask OptionsOfRank2(int rank) {
  Ask a;
  if (rank == 2) a.options.per_dim["tp"].timeout = absl::Seconds(30);
  return a;
}
Ask BackendOfRank1(int rank) {
  Ask a;
  a.options.all.backend = rank == 1 ? "gloo" : "auto";
  return a;
}
Ask BadShapeOfRank2(int rank) {
  Ask a;
  if (rank == 2) a.shape = {3, 2};
  return a;
}
Ask BadShapeOfRank0(int rank) {
  Ask a;
  if (rank == 0) a.shape = {3, 2};
  return a;
}

constexpr char kDiffer[] = "InitDeviceMesh: the ranks disagree on the mesh: ";
constexpr char kTail[] = "; every rank fails with this error";

const Case kCases[] = {
    {"shape", ShapeOfRank3, absl::StatusCode::kInvalidArgument,
     "global rank 3 asked for mesh shape (4, 1), global rank 0 for (2, 2)", 3},
    {"dim_names", NamesOfRank1, absl::StatusCode::kInvalidArgument,
     "global rank 1 asked for mesh dim names (tp, dp), global rank 0 for "
     "(dp, tp)",
     1},
    {"per_dim_options", OptionsOfRank2, absl::StatusCode::kInvalidArgument,
     "global rank 2 asked for options of mesh dim 1 {backend=unset, "
     "timeout=30s, nccl=unset}, global rank 0 for {backend=unset, "
     "timeout=unset, nccl=unset}",
     2},
    {"backend", BackendOfRank1, absl::StatusCode::kInvalidArgument,
     "global rank 1 asked for options of mesh dim 0 {backend=gloo, "
     "timeout=unset, nccl=unset}, global rank 0 for {backend=auto, "
     "timeout=unset, nccl=unset}",
     1},
    {"own_check_fails", BadShapeOfRank2, absl::StatusCode::kInvalidArgument, "",
     2},
    // Rank 0's spec is what the others wait for first.
    {"rank0_check_fails", BadShapeOfRank0, absl::StatusCode::kInvalidArgument,
     "", 0},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MeshAgreementTest : public ::testing::TestWithParam<Case> {};

TEST_P(MeshAgreementTest, EveryRankFailsAtOnceWithTheSameError) {
  const Case& c = GetParam();
  std::string want = absl::StrCat(kDiffer, c.want, kTail);
  // A rank whose own check failed: the others get its error, naming it as
  // their peer (not as a disagreement).
  const bool abandoned = *c.want == '\0';
  if (abandoned) {
    want = absl::StrCat("InitDeviceMesh: global rank ", c.disagreeing,
                        " could not make its mesh: mesh_shape product (6) "
                        "must equal world size (4)");
  }
  absl::Status s = RunRanks(4, [&](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    const Ask ask = c.ask(b.rank());
    const absl::Time start = absl::Now();
    auto mesh = InitDeviceMesh(runtime, ask.device_type, ask.shape, ask.names,
                               ask.options);
    const absl::Duration took = absl::Now() - start;
    RETURN_IF_ERROR(Expect(!mesh.ok(), "the mesh was made"));
    const absl::Status& got = mesh.status();
    // The rank whose own check failed gets its own error; the others the
    // verdict naming it.
    const bool own = abandoned && b.rank() == c.disagreeing;
    if (own) {
      return Expect(
          got.message() == "mesh_shape product (6) must equal world size (4)",
          got.ToString());
    }
    RETURN_IF_ERROR(
        Expect(got.code() == c.code && got.message() == want,
               absl::StrCat("got ", got.ToString(), "\nwant ", want)));
    const ErrorInfo info = GetErrorInfo(got);
    RETURN_IF_ERROR(
        Expect(abandoned ? info.peer == c.disagreeing && info.disagreeing == -1
                         : info.disagreeing == c.disagreeing,
               absl::StrCat("payloads: peer ", info.peer, " disagreeing ",
                            info.disagreeing)));
    return Expect(took < absl::Seconds(10),
                  absl::StrCat("took ", absl::FormatDuration(took)));
  });
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(Mismatches, MeshAgreementTest,
                         ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// A must-agree setting read from the environment: rank 1 runs another
// one-shot bound for shared-memory all-reduces (given as "4K": the parsed
// value is what the error names).
TEST(MeshAgreement, ASettingThatMustAgree) {
  absl::Status s = RunRanks(2, [](Bootstrap& b) -> absl::Status {
    if (b.rank() == 1) setenv("DEVMESH_SHM_ONESHOT_MAX", "4K", 1);
    RETURN_IF_ERROR(ReloadProcessSettings().status());
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    auto mesh = InitDeviceMesh(runtime, "cpu", {2}, {"w"});
    return Expect(
        !mesh.ok() &&
            mesh.status().message() ==
                absl::StrCat(kDiffer,
                             "global rank 1 asked for setting "
                             "DEVMESH_SHM_ONESHOT_MAX 4096, global rank 0 "
                             "for unset",
                             kTail),
        mesh.status().ToString());
  });
  EXPECT_TRUE(s.ok()) << s;
}

// The same value written two ways agrees: the parsed values are compared.
TEST(MeshAgreement, OneValueWrittenTwoWaysAgrees) {
  absl::Status s = RunRanks(2, [](Bootstrap& b) -> absl::Status {
    setenv("DEVMESH_SHM_SLOT_BYTES", b.rank() == 0 ? "65536" : "64K", 1);
    RETURN_IF_ERROR(ReloadProcessSettings().status());
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2}, {"w"}));
    ASSIGN_OR_RETURN(w, mesh.GetGroup("w"));
    int32_t x = b.rank() + 1;
    RETURN_IF_ERROR(w->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum));
    return Expect(x == 3, absl::StrCat("sum ", x));
  });
  EXPECT_TRUE(s.ok()) << s;
}

// A malformed or unknown DEVMESH_* variable on one rank: that rank's
// InitDeviceMesh fails naming it, and the others at once naming that rank.
TEST(MeshAgreement, AMalformedOrUnknownSettingFailsEveryRankAtOnce) {
  struct Bad {
    const char* name;
    const char* value;
    const char* error;
  };
  for (const Bad& bad : {
           Bad{"DEVMESH_SHM_SLOT_BYTES", "64x",
               "malformed setting DEVMESH_SHM_SLOT_BYTES='64x': want a "
               "positive byte count (digits, optionally followed by K, M or "
               "G)"},
           Bad{"DEVMESH_SHM_SLOTBYTES", "65536",
               "unknown setting DEVMESH_SHM_SLOTBYTES='65536': devmesh reads "
               "no such variable (a typo? its settings are "},
       }) {
    absl::Status s = RunRanks(3, [&](Bootstrap& b) -> absl::Status {
      if (b.rank() == 2) setenv(bad.name, bad.value, 1);
      (void)ReloadProcessSettings();
      ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
      const absl::Time start = absl::Now();
      auto mesh = InitDeviceMesh(runtime, "cpu", {3}, {"w"});
      const absl::Duration took = absl::Now() - start;
      RETURN_IF_ERROR(Expect(absl::IsInvalidArgument(mesh.status()),
                             mesh.status().ToString()));
      const std::string want = b.rank() == 2
                                   ? std::string(bad.error)
                                   : absl::StrCat(
                                         "InitDeviceMesh: global rank 2 could "
                                         "not make its mesh: ",
                                         bad.error);
      RETURN_IF_ERROR(Expect(
          absl::StartsWith(mesh.status().message(), want),
          absl::StrCat("got ", mesh.status().ToString(), "\nwant ", want)));
      if (b.rank() != 2) {
        RETURN_IF_ERROR(
            Expect(GetErrorInfo(mesh.status()).peer == 2, "peer payload"));
      }
      return Expect(took < absl::Seconds(10),
                    absl::StrCat("took ", absl::FormatDuration(took)));
    });
    EXPECT_TRUE(s.ok()) << bad.name << ": " << s;
  }
}

// Agreeing ranks make the mesh and use it, twice over (two agreements).
TEST(MeshAgreement, AgreeingRanksGetTheirMeshes) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    const int64_t trips = runtime->store_round_trips();
    ASSIGN_OR_RETURN(mesh,
                     InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    // Rank 0: Set, Wait (the others' marks), CompareSet; the others: Get,
    // Set (its mark), Get.
    const int64_t spent = runtime->store_round_trips() - trips;
    RETURN_IF_ERROR(Expect(spent == 3,
                           absl::StrCat("agreement round trips ", spent)));
    ASSIGN_OR_RETURN(tp, mesh.GetGroup("tp"));
    int32_t x = b.rank();
    RETURN_IF_ERROR(tp->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum));
    const int32_t want = b.rank() < 2 ? 1 : 5;
    RETURN_IF_ERROR(Expect(x == want, absl::StrCat("tp sum ", x)));
    ASSIGN_OR_RETURN(again, InitDeviceMesh(runtime, "cpu", {4}, {"w"}));
    return Expect(again.size() == 4, "second mesh");
  });
  EXPECT_TRUE(s.ok()) << s;
}

// A rank that never calls InitDeviceMesh: the others end by the timeout,
// counting who came.
TEST(MeshAgreement, AMissingRankIsCountedAtTheTimeout) {
  absl::Status s = RunRanks(3, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    if (b.rank() == 2) {
      absl::SleepFor(absl::Seconds(4));
      return absl::OkStatus();
    }
    MeshOptions options;
    options.all.timeout = absl::Seconds(2);
    auto mesh = InitDeviceMesh(runtime, "cpu", {3}, {"w"}, options);
    return Expect(
        absl::IsDeadlineExceeded(mesh.status()) &&
            absl::StartsWith(mesh.status().message(),
                             "InitDeviceMesh: 2 of 3 ranks reached the mesh "
                             "agreement within 2s (global rank 0 had); the "
                             "others did not call InitDeviceMesh"),
        mesh.status().ToString());
  });
  EXPECT_TRUE(s.ok()) << s;
}

// ---- Root meshes: DeviceMesh::Create, FromLayout, Deserialize ---------------

// Every member of a Create'd root whose rank 3 lists the ranks in another
// order fails at once with the same InvalidArgument naming rank 3 and the
// table: same shape, other partners, never summed with.
TEST(RootAgreement, ACreateWithAnotherRankTableFailsEveryMemberAtOnce) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    const RankTable table = b.rank() == 3 ? RankTable{{0, 2}, {1, 3}}
                                          : RankTable{{0, 1}, {2, 3}};
    const absl::Time start = absl::Now();
    auto mesh = DeviceMesh::Create(runtime, "cpu", table, {"dp", "tp"});
    const absl::Duration took = absl::Now() - start;
    RETURN_IF_ERROR(Expect(!mesh.ok(), "the mesh was made"));
    const std::string want =
        "DeviceMesh::Create: the ranks disagree on the mesh: global rank 3 "
        "asked for mesh ranks (row-major) (0, 2, 1, 3), global rank 0 for "
        "(0, 1, 2, 3); every rank of the mesh fails with this error";
    RETURN_IF_ERROR(Expect(mesh.status().code() ==
                                   absl::StatusCode::kInvalidArgument &&
                               mesh.status().message() == want,
                           mesh.status().ToString()));
    RETURN_IF_ERROR(Expect(GetErrorInfo(mesh.status()).disagreeing == 3,
                           "disagreement payload"));
    return Expect(took < absl::Seconds(10),
                  absl::StrCat("took ", absl::FormatDuration(took)));
  });
  EXPECT_TRUE(s.ok()) << s;
}

// FromLayout of the same shape with the dim names in another order.
TEST(RootAgreement, AFromLayoutWithOtherNamesFailsEveryMember) {
  absl::Status s = RunRanks(2, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    std::vector<std::string> names = {"dp", "tp"};
    if (b.rank() == 1) std::swap(names[0], names[1]);
    ASSIGN_OR_RETURN(layout, MeshLayout::FromShape({1, 2}, names));
    auto mesh = DeviceMesh::FromLayout(runtime, "cpu", layout);
    const std::string want =
        "DeviceMesh::FromLayout: the ranks disagree on the mesh: global rank "
        "1 asked for mesh dim names (tp, dp), global rank 0 for (dp, tp); "
        "every rank of the mesh fails with this error";
    return Expect(absl::IsInvalidArgument(mesh.status()) &&
                      mesh.status().message() == want,
                  mesh.status().ToString());
  });
  EXPECT_TRUE(s.ok()) << s;
}

// A member whose own check fails (an option for a dim the mesh lacks) tells
// the others, who fail at once with its error and its rank as the peer.
TEST(RootAgreement, AMemberWhoseOwnCheckFailsTellsTheOthers) {
  absl::Status s = RunRanks(3, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    if (b.rank() == 1) options.per_dim["pp"].timeout = absl::Seconds(5);
    const absl::Time start = absl::Now();
    auto mesh = DeviceMesh::Create(runtime, "cpu", {0, 1, 2}, {"w"}, options);
    const absl::Duration took = absl::Now() - start;
    RETURN_IF_ERROR(Expect(absl::IsInvalidArgument(mesh.status()),
                           mesh.status().ToString()));
    if (b.rank() != 1) {
      RETURN_IF_ERROR(Expect(
          absl::StartsWith(mesh.status().message(),
                           "DeviceMesh::Create: global rank 1 could not make "
                           "its mesh: ") &&
              GetErrorInfo(mesh.status()).peer == 1,
          mesh.status().ToString()));
    }
    return Expect(took < absl::Seconds(10),
                  absl::StrCat("took ", absl::FormatDuration(took)));
  });
  EXPECT_TRUE(s.ok()) << s;
}

// Agreeing members get their meshes at O(1) round trips each; ranks outside
// a root take no part (ranks 2 and 3 never call Create for the pair {0, 1});
// a Deserialize'd root agrees like a Create'd one.
TEST(RootAgreement, AgreeingMembersGetTheirMeshesAndOthersTakeNoPart) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    int64_t trips = runtime->store_round_trips();
    ASSIGN_OR_RETURN(mesh, DeviceMesh::Create(runtime, "cpu", {{3, 1}, {0, 2}},
                                              {"a", "b"}));
    // The lowest member (0): Set, Wait (the others' marks), CompareSet; the
    // others: Get, Set (its mark), Get.
    const int64_t spent = runtime->store_round_trips() - trips;
    RETURN_IF_ERROR(Expect(spent == 3,
                           absl::StrCat("agreement round trips ", spent)));
    ASSIGN_OR_RETURN(g, mesh.GetGroup("b"));
    int32_t x = b.rank();
    RETURN_IF_ERROR(g->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum));
    RETURN_IF_ERROR(
        Expect(x == ((b.rank() == 3 || b.rank() == 1) ? 4 : 2),
               absl::StrCat("b sum ", x)));
    ASSIGN_OR_RETURN(copy, DeviceMesh::Deserialize(mesh.Serialize(), runtime));
    RETURN_IF_ERROR(Expect(copy.layout() == mesh.layout(), "deserialized"));
    if (b.rank() < 2) {
      trips = runtime->store_round_trips();
      ASSIGN_OR_RETURN(pair, DeviceMesh::Create(runtime, "cpu", {0, 1}, {"p"}));
      ASSIGN_OR_RETURN(p, pair.GetGroup("p"));
      int32_t y = 1;
      RETURN_IF_ERROR(
          p->AllReduce(&y, &y, 1, DataType::kInt32, ReduceOp::kSum));
      RETURN_IF_ERROR(Expect(y == 2, absl::StrCat("pair sum ", y)));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
