// devmesh/tests/device_mesh/two_level/two_level_mesh_test.cc
// How a mesh picks the two-level group (device_mesh/mesh_runtime.h), in 4
// real processes whose host table is given (SetHostInfo), UCX across hosts:
// - hosts h0 h0 h1 h1: a 4-rank dim is two-level (and all-reduces right on
//   both paths), with DEVMESH_TWO_LEVEL unset (the default) as with 1; its
//   creation costs the store round trips of the flat UCX group of
//   DEVMESH_TWO_LEVEL=0 (2), and its first all-reduce, which makes its
//   levels, none; on a 2x2 mesh the dim across hosts has one member per
//   host (the cross-host backend) and the one inside a host is shm;
// - DEVMESH_TWO_LEVEL=0: the same 4-rank dim is a flat UCX group;
// - hosts h0 h0 h0 h1 (uneven): flat.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/forwarding_communicator.h"
#include "comm/two_level/two_level_communicator.h"
#include "config/settings.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

using ::devmesh::testing::RunRanks;

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// The communicator under the mesh's guard.
const Communicator& Inner(const std::shared_ptr<Communicator>& c) {
  auto* f = dynamic_cast<ForwardingCommunicator*>(c.get());
  return f != nullptr ? *f->inner() : *c;
}

std::string InnerBackend(const std::shared_ptr<Communicator>& c) {
  return std::string(Inner(c).backend());
}

absl::StatusOr<std::shared_ptr<MeshRuntime>> Runtime(
    Bootstrap& b, std::vector<std::string> hosts,
    std::optional<bool> two_level) {
  Settings settings;
  settings.cross_host_backend = CrossHostBackend::kUcx;
  settings.two_level = two_level;
  SetProcessSettings(settings);
  DEVMESH_ASSIGN_OR_RETURN(
      auto runtime,
      MeshRuntime::Create(b.store(), b.rank(), b.world_size(), b.local_rank()));
  runtime->SetHostInfo(std::move(hosts), "127.0.0.1");
  return runtime;
}

absl::Status CheckSum(Communicator& c, size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>((c.rank() + 1) * (i % 7));
  }
  DEVMESH_RETURN_IF_ERROR(c.AllReduce(absl::MakeSpan(x), ReduceOp::kSum));
  const int s = c.size() * (c.size() + 1) / 2;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != static_cast<float>(s * (i % 7))) {
      return absl::InternalError(absl::StrCat("n=", n, " [", i, "] = ", x[i]));
    }
  }
  return absl::OkStatus();
}

// The dp dim of a 4-rank mesh on h0 h0 h1 h1 with DEVMESH_TWO_LEVEL
// `two_level`: two-level, made with the flat group's 2 store round trips;
// its first all-reduce makes the levels with none.
absl::Status CheckTwoLevelDim(Bootstrap& b, std::optional<bool> two_level) {
  DEVMESH_ASSIGN_OR_RETURN(auto runtime,
                           Runtime(b, {"h0", "h0", "h1", "h1"}, two_level));
  DEVMESH_ASSIGN_OR_RETURN(auto mesh,
                           InitDeviceMesh(runtime, "cpu", {4}, {"dp"}));
  const int64_t before = runtime->store_round_trips();
  DEVMESH_ASSIGN_OR_RETURN(auto dp, mesh.GetGroup("dp"));
  const int64_t made = runtime->store_round_trips() - before;
  DEVMESH_RETURN_IF_ERROR(
      Expect(InnerBackend(dp) == "two_level", "dp is " + InnerBackend(dp)));
  DEVMESH_RETURN_IF_ERROR(
      Expect(made == 2, absl::StrCat(made, " store round trips to make dp")));
  DEVMESH_RETURN_IF_ERROR(
      Expect(TwoLevelPathOf(Inner(dp)) == TwoLevelPath::kNotMade,
             "levels made with the group"));
  DEVMESH_RETURN_IF_ERROR(CheckSum(*dp, 10));
  DEVMESH_RETURN_IF_ERROR(
      Expect(TwoLevelPathOf(Inner(dp)) == TwoLevelPath::kTwoLevels,
             "no levels after the first all-reduce"));
  DEVMESH_RETURN_IF_ERROR(CheckSum(*dp, 100001));
  const int64_t used = runtime->store_round_trips() - before;
  return Expect(used == 2, absl::StrCat(used,
                                        " store round trips to make "
                                        "dp and all-reduce on it twice"));
}

TEST(TwoLevelMesh, EqualHostsMakeATwoLevelDim) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    DEVMESH_RETURN_IF_ERROR(CheckTwoLevelDim(b, true));
    DEVMESH_ASSIGN_OR_RETURN(auto runtime,
                             Runtime(b, {"h0", "h0", "h1", "h1"}, true));
    DEVMESH_ASSIGN_OR_RETURN(
        auto mesh2, InitDeviceMesh(runtime, "cpu", {2, 2}, {"host", "local"}));
    DEVMESH_ASSIGN_OR_RETURN(auto across, mesh2.GetGroup("host"));
    DEVMESH_ASSIGN_OR_RETURN(auto inside, mesh2.GetGroup("local"));
    DEVMESH_RETURN_IF_ERROR(Expect(InnerBackend(across) == "ucx",
                                   "host is " + InnerBackend(across)));
    DEVMESH_RETURN_IF_ERROR(Expect(InnerBackend(inside) == "shm",
                                   "local is " + InnerBackend(inside)));
    return CheckSum(*across, 1000);
  });
  EXPECT_TRUE(s.ok()) << s;
}

// DEVMESH_TWO_LEVEL unset: two-level (kTwoLevelByDefault).
TEST(TwoLevelMesh, UnsetIsTwoLevel) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    return CheckTwoLevelDim(b, std::nullopt);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(TwoLevelMesh, SettingOffGivesAFlatGroup) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    DEVMESH_ASSIGN_OR_RETURN(auto runtime,
                             Runtime(b, {"h0", "h0", "h1", "h1"}, false));
    DEVMESH_ASSIGN_OR_RETURN(auto mesh,
                             InitDeviceMesh(runtime, "cpu", {4}, {"dp"}));
    const int64_t before = runtime->store_round_trips();
    DEVMESH_ASSIGN_OR_RETURN(auto dp, mesh.GetGroup("dp"));
    const int64_t made = runtime->store_round_trips() - before;
    DEVMESH_RETURN_IF_ERROR(
        Expect(InnerBackend(dp) == "ucx", "dp is " + InnerBackend(dp)));
    DEVMESH_RETURN_IF_ERROR(
        Expect(made == 2, absl::StrCat(made, " store round trips to make dp")));
    return CheckSum(*dp, 1000);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(TwoLevelMesh, UnevenHostsGiveAFlatGroup) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    DEVMESH_ASSIGN_OR_RETURN(auto runtime,
                             Runtime(b, {"h0", "h0", "h0", "h1"}, true));
    DEVMESH_ASSIGN_OR_RETURN(auto mesh,
                             InitDeviceMesh(runtime, "cpu", {4}, {"dp"}));
    DEVMESH_ASSIGN_OR_RETURN(auto dp, mesh.GetGroup("dp"));
    DEVMESH_RETURN_IF_ERROR(
        Expect(InnerBackend(dp) == "ucx", "dp is " + InnerBackend(dp)));
    return CheckSum(*dp, 1000);
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
