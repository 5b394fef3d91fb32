// devmesh/tests/device_mesh/two_level/grow_hosts_test.cc
// A Grow carries each admitted spare's own host to every member
// (GrowDecision::hosts), so the grown mesh chooses its groups' transports
// from where the spare runs now, not from its predecessor's entry. 6 real
// processes whose host tables are given (SetHostInfo), UCX across hosts:
// ranks 0-3 are the mesh, 4 and 5 spares (DeviceMesh::JoinAsSpare) that say
// they run on "h2", where the members' tables hold their predecessors'
// hosts. After the Grow every process's table is the same, the groups'
// backends are the ones that table gives, and all-reduces are exact:
// - (dp=2, tp=2) grown to (3, 2), flat cross-host groups: the new tp group
//   [4, 5] is shm (its predecessors' hosts h0, h1 would make it ucx), the
//   kept tp groups stay shm, the dp lines (one member per host) are ucx;
// - DEVMESH_TWO_LEVEL=1, dp=4 over h0 h0 h1 h1 grown to dp=6: two members
//   on each of h0, h1, h2 make dp two-level (the predecessors' h0 and h5
//   would make the hosts uneven, a flat ucx group).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/forwarding_communicator.h"
#include "config/settings.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

using ::devmesh::testing::RunRanks;

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// The backend under the mesh's wrappers.
std::string InnerBackend(const std::shared_ptr<Communicator>& group) {
  Communicator* c = group.get();
  while (auto* f = dynamic_cast<ForwardingCommunicator*>(c)) c = f->inner();
  return std::string(c->backend());
}

// Rank r's runtime: the members' table `members_table`; a spare's own entry
// is "h2" (where it runs now; SpareRuntimeFromEnv puts LocalHostName there).
absl::StatusOr<std::shared_ptr<MeshRuntime>> Runtime(
    Bootstrap& b, std::vector<std::string> members_table, bool two_level) {
  Settings settings;
  settings.cross_host_backend = CrossHostBackend::kUcx;
  settings.two_level = two_level;
  SetProcessSettings(settings);
  DEVMESH_ASSIGN_OR_RETURN(
      auto runtime, MeshRuntime::Create(b.store(), b.rank(), b.world_size(),
                                        b.local_rank()));
  if (b.rank() >= 4) members_table[b.rank()] = "h2";
  runtime->SetHostInfo(std::move(members_table), "127.0.0.1");
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

// The grown mesh: members 0-3 make `table`'s mesh, use every group, and
// call Grow along dp until it admits 4 and 5; the spares join.
absl::StatusOr<DeviceMesh> Grown(std::shared_ptr<MeshRuntime> runtime,
                                 const RankTable& table,
                                 std::vector<std::string> names) {
  if (runtime->rank() >= 4) {
    DEVMESH_ASSIGN_OR_RETURN(GrowResult joined,
                             DeviceMesh::JoinAsSpare(runtime));
    DEVMESH_RETURN_IF_ERROR(
        Expect(joined.report.grown &&
                   joined.report.admitted == std::vector<int>{4, 5},
               "spare: " + joined.report.ToString()));
    return joined.mesh;
  }
  DEVMESH_ASSIGN_OR_RETURN(DeviceMesh mesh,
                           DeviceMesh::Create(runtime, "cpu", table, names));
  for (const std::string& name : names) {
    DEVMESH_ASSIGN_OR_RETURN(auto g, mesh.GetGroup(name));
    DEVMESH_RETURN_IF_ERROR(CheckSum(*g, 100));
  }
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (absl::Now() < until) {
    DEVMESH_ASSIGN_OR_RETURN(GrowResult r, mesh.Grow("dp"));
    if (r.report.grown) {
      DEVMESH_RETURN_IF_ERROR(
          Expect(r.report.admitted == std::vector<int>{4, 5},
                 "member: " + r.report.ToString()));
      return r.mesh;
    }
    absl::SleepFor(absl::Milliseconds(20));  // the spares not ready yet
  }
  return absl::DeadlineExceededError("no Grow admitted the spares in 60 s");
}

absl::Status ExpectTable(const MeshRuntime& runtime,
                         const std::vector<std::string>& want) {
  return Expect(runtime.hostnames() == want,
                absl::StrCat("rank ", runtime.rank(), "'s host table [",
                             absl::StrJoin(runtime.hostnames(), ","),
                             "], want [", absl::StrJoin(want, ","), "]"));
}

TEST(GrowHosts, TheSparesHostMakesItsGroupShm) {
  absl::Status s = RunRanks(6, [](Bootstrap& b) -> absl::Status {
    DEVMESH_ASSIGN_OR_RETURN(
        auto runtime, Runtime(b, {"h0", "h0", "h1", "h1", "h0", "h1"}, false));
    DEVMESH_ASSIGN_OR_RETURN(
        DeviceMesh mesh, Grown(runtime, {{0, 1}, {2, 3}}, {"dp", "tp"}));
    DEVMESH_RETURN_IF_ERROR(
        ExpectTable(*runtime, {"h0", "h0", "h1", "h1", "h2", "h2"}));
    DEVMESH_RETURN_IF_ERROR(Expect(mesh.shape() == std::vector<int64_t>{3, 2},
                                   "grown to " + mesh.ToString()));
    DEVMESH_ASSIGN_OR_RETURN(auto tp, mesh.GetGroup("tp"));
    DEVMESH_ASSIGN_OR_RETURN(auto dp, mesh.GetGroup("dp"));
    const std::string me = absl::StrCat("rank ", b.rank(), ": ");
    DEVMESH_RETURN_IF_ERROR(Expect(InnerBackend(tp) == "shm",
                                   me + "tp is " + InnerBackend(tp)));
    DEVMESH_RETURN_IF_ERROR(Expect(InnerBackend(dp) == "ucx",
                                   me + "dp is " + InnerBackend(dp)));
    DEVMESH_RETURN_IF_ERROR(CheckSum(*tp, 1000));
    DEVMESH_RETURN_IF_ERROR(CheckSum(*dp, 1000));
    return CheckSum(*dp, 100001);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(GrowHosts, TwoLevelAfterAGrowIsExact) {
  absl::Status s = RunRanks(6, [](Bootstrap& b) -> absl::Status {
    DEVMESH_ASSIGN_OR_RETURN(
        auto runtime, Runtime(b, {"h0", "h0", "h1", "h1", "h0", "h5"}, true));
    DEVMESH_ASSIGN_OR_RETURN(DeviceMesh mesh,
                             Grown(runtime, {0, 1, 2, 3}, {"dp"}));
    DEVMESH_RETURN_IF_ERROR(
        ExpectTable(*runtime, {"h0", "h0", "h1", "h1", "h2", "h2"}));
    DEVMESH_ASSIGN_OR_RETURN(auto dp, mesh.GetGroup("dp"));
    DEVMESH_RETURN_IF_ERROR(
        Expect(dp->size() == 6 && InnerBackend(dp) == "two_level",
               absl::StrCat("rank ", b.rank(), ": dp is ", InnerBackend(dp),
                            " of ", dp->size())));
    DEVMESH_RETURN_IF_ERROR(CheckSum(*dp, 10));
    DEVMESH_RETURN_IF_ERROR(CheckSum(*dp, 1000));
    return CheckSum(*dp, 100001);
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
