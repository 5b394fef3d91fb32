// Ranks that ask for their groups in different orders, in real processes
// over Gloo (issue 19). Groups are named by their line in the layout, so
// each one is right whatever order its members create it in, or its creation
// ends with DeadlineExceeded naming the members that did not come: never a
// group with the wrong members or a wrong sum.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

namespace devmesh {
namespace {

using ::devmesh::testing::CheckDimGroup;
using ::devmesh::testing::Expect;
using ::devmesh::testing::RunRanks;
using ::devmesh::testing::RuntimeOf;

// Rank 0 asks for dp then tp; every other rank for tp then dp (the new
// user's program of the issue). Each group is checked (members from the
// layout, exact all-reduce and all-gather) as soon as it is made.
absl::Status SwappedOrder(Bootstrap& b, int64_t dp, int64_t tp) {
  ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
  ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {dp, tp}, {"dp", "tp"}));
  const std::vector<int> order =
      b.rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
  for (int d : order) {
    ASSIGN_OR_RETURN(group, mesh.GetGroup(d));
    RETURN_IF_ERROR(Expect(group->size() == (d == 0 ? dp : tp),
                           absl::StrCat("dim ", d, " group of size ",
                                        group->size())));
    RETURN_IF_ERROR(CheckDimGroup(mesh, d));
  }
  return Expect(runtime->world_communicators() == 0,
                "a world communicator was made for dp and tp");
}

TEST(GroupOrder, RankZeroSwappedOnTwoByTwo) {
  absl::Status s = RunRanks(
      4, [](Bootstrap& b) { return SwappedOrder(b, 2, 2); });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(GroupOrder, RankZeroSwappedOnTwoByFour) {
  absl::Status s = RunRanks(
      8, [](Bootstrap& b) { return SwappedOrder(b, 2, 4); });
  EXPECT_TRUE(s.ok()) << s;
}

// Orders that wait in a circle on a 2x2 mesh: ranks 0 and 3 ask for dp
// first, ranks 1 and 2 for tp first, so 0 waits for 2 (in tp), 2 for 3 (in
// dp), 3 for 1 (in tp), 1 for 0 (in dp). No group can form: every rank's
// first GetGroup ends at its 2 s timeout with DeadlineExceeded naming the
// one member it waited for, and no rank ever gets a group.
TEST(GroupOrder, CircularWaitEndsInDeadlineExceededNamingTheMember) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    options.all.timeout = absl::Seconds(2);
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"},
                                          options));
    const int me = b.rank();
    const bool dp_first = me == 0 || me == 3;
    const int first = dp_first ? 0 : 1;
    // The first dim's line partner: dp pairs 0-2 and 1-3, tp 0-1 and 2-3.
    const int partner = first == 0 ? (me + 2) % 4 : (me ^ 1);
    auto g = mesh.GetGroup(first);
    const std::string dim = first == 0 ? "dp" : "tp";
    const std::string line = absl::StrCat("[", std::min(me, partner), ", ",
                                          std::max(me, partner), "]");
    RETURN_IF_ERROR(Expect(
        absl::IsDeadlineExceeded(g.status()) &&
            absl::StartsWith(
                g.status().message(),
                absl::StrCat("the group along mesh dim '", dim,
                             "' (global ranks ", line, ") was not made: ")) &&
            absl::StrContains(g.status().message(),
                              absl::StrCat("global rank(s) [", partner,
                                           "] did not join the group")) &&
            absl::StrContains(g.status().message(),
                              " -- members that did not come are likely "
                              "ranks that never asked for this dim's group"),
        absl::StrCat("first GetGroup: ", g.status().ToString(),
                     ", want DeadlineExceeded naming global rank ", partner)));
    // No rank goes on to its second dim before all have failed their first
    // (else a partner's second GetGroup could publish in this rank's group
    // while it is still waiting).
    RETURN_IF_ERROR(b.Barrier("circular/first-done"));
    // The failure is kept: asking again returns it without trying again.
    auto again = mesh.GetGroup(first);
    RETURN_IF_ERROR(Expect(again.status() == g.status(),
                           absl::StrCat("second ask: ", again.status().ToString())));
    // The other dim is a circle again (each partner is in its own second
    // group): an error, never a group.
    auto other = mesh.GetGroup(1 - first);
    return Expect(!other.ok(), "the second dim formed a group in a circle");
  });
  EXPECT_TRUE(s.ok()) << s;
}

// Two world-sized dims of different timeouts asked for in opposite orders
// (even ranks 'w' at 2 s then 'all' at 3 s, odd ranks the reverse): each is
// the world communicator of its own timeout, named by it, so neither can
// pair with the other; both orders wait in a circle and end in
// DeadlineExceeded, never in a group of the wrong timeout.
TEST(GroupOrder, WorldSizedDimsOfOtherTimeoutsNeverPair) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    options.all.backend = "gloo";
    options.all.timeout = absl::Seconds(2);
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {4}, {"w"}, options));
    GroupOptions three;
    three.timeout = absl::Seconds(3);
    ASSIGN_OR_RETURN(all, mesh.Flatten("all", three));
    const bool even = b.rank() % 2 == 0;
    auto first = even ? mesh.GetGroup("w") : all.GetGroup();
    RETURN_IF_ERROR(Expect(absl::IsDeadlineExceeded(first.status()),
                           absl::StrCat("first world-sized dim: ",
                                        first.status().ToString(),
                                        ", want DeadlineExceeded")));
    return b.Barrier("worlds/done");
  });
  EXPECT_TRUE(s.ok()) << s;
}

// Two roots with equal layouts are two sets of groups (the root's index is
// part of each group's name). Ranks 0 and 1 (tp line {0, 1}) use them in
// opposite orders: their first tp groups wait for each other and end in
// DeadlineExceeded; ranks 2 and 3 (same order) get right groups, one per
// root, and aborting the first root leaves the second's working.
TEST(GroupOrder, TwoRootsOfOneLayoutNeverShareAGroup) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    options.all.backend = "gloo";
    options.all.timeout = absl::Seconds(2);
    ASSIGN_OR_RETURN(m1, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"},
                                        options));
    ASSIGN_OR_RETURN(m2, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"},
                                        options));
    const int me = b.rank();
    if (me == 0) {
      auto g = m2.GetGroup("tp");
      RETURN_IF_ERROR(Expect(absl::IsDeadlineExceeded(g.status()),
                             absl::StrCat("rank 0 m2.tp: ", g.status().ToString())));
    } else if (me == 1) {
      auto g = m1.GetGroup("tp");
      RETURN_IF_ERROR(Expect(absl::IsDeadlineExceeded(g.status()),
                             absl::StrCat("rank 1 m1.tp: ", g.status().ToString())));
    } else {
      ASSIGN_OR_RETURN(g1, m1.GetGroup("tp"));
      ASSIGN_OR_RETURN(g2, m2.GetGroup("tp"));
      RETURN_IF_ERROR(Expect(g1 != g2, "two roots share a group"));
      RETURN_IF_ERROR(m1.Abort());
      RETURN_IF_ERROR(CheckDimGroup(m2, 1));
    }
    return b.Barrier("roots/done");
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
