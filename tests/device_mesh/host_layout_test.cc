// Host-aware layout (device_mesh/host_layout.h): which dims stay inside one
// host, and InitDeviceMesh's MeshOptions.require_inside_host, over a runtime
// whose hosts are set by hand (no processes; the multi-host runs are in
// tools/launcher_check.sh).
#include "device_mesh/host_layout.h"

#include <memory>
#include <string>
#include <vector>

#include "store/memory_store.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"

namespace devmesh {
namespace {

using ::testing::HasSubstr;

// Ranks 0, 1 on h0 and 2, 3 on h1: what a launcher gives with 2 per host.
const std::vector<std::string> kHostMajor = {"h0", "h0", "h1", "h1"};

TEST(DimHostSpansTest, DpCrossesTpStaysOnHostMajorRanks) {
  auto layout = *MeshLayout::FromShape({2, 2}, {"dp", "tp"});
  auto spans = DimHostSpans(layout, kHostMajor);
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), 2u);
  EXPECT_EQ((*spans)[0].dim, "dp");
  EXPECT_FALSE((*spans)[0].inside_host);
  EXPECT_EQ((*spans)[0].line, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ((*spans)[0].ToString(),
            "line 0,2 crosses hosts 'h0' (rank 0) and 'h1' (rank 2)");
  EXPECT_EQ((*spans)[1].dim, "tp");
  EXPECT_TRUE((*spans)[1].inside_host);
  EXPECT_EQ((*spans)[1].ToString(), "inside one host");
}

TEST(DimHostSpansTest, NamedTheOtherWayRoundTpCrosses) {
  auto layout = *MeshLayout::FromShape({2, 2}, {"tp", "dp"});
  auto spans = *DimHostSpans(layout, kHostMajor);
  EXPECT_FALSE(spans[0].inside_host);
  EXPECT_EQ(spans[0].dim, "tp");
  EXPECT_TRUE(spans[1].inside_host);
}

TEST(DimHostSpansTest, OneHostKeepsEveryDimInside) {
  auto layout = *MeshLayout::FromShape({2, 2, 2});
  auto spans = *DimHostSpans(layout, std::vector<std::string>(8, "solo"));
  ASSERT_EQ(spans.size(), 3u);
  for (const DimHostSpan& s : spans) EXPECT_TRUE(s.inside_host) << s.dim;
  EXPECT_EQ(spans[2].dim, "dim_2");
}

TEST(DimHostSpansTest, OnlyTheLastLineCrossing) {
  // 2 x 3 over hosts a a a / a b b: tp's first line (0,1,2) stays on a, its
  // second (3,4,5) crosses a -> b at rank 4; every dp line but the first
  // crosses; the first crossing reported is the first in rank order.
  auto layout = *MeshLayout::FromShape({2, 3}, {"dp", "tp"});
  const std::vector<std::string> hosts = {"a", "a", "a", "a", "b", "b"};
  auto spans = *DimHostSpans(layout, hosts);
  EXPECT_EQ(spans[0].ToString(),
            "line 1,4 crosses hosts 'a' (rank 1) and 'b' (rank 4)");
  EXPECT_EQ(spans[1].ToString(),
            "line 3,4,5 crosses hosts 'a' (rank 3) and 'b' (rank 4)");
}

TEST(DimHostSpansTest, ExplicitTableAndSlice) {
  // Rank table [[0, 2], [1, 3]] over host-major hosts: the second dim
  // crosses, the first stays. A slice along the first dim stays inside.
  auto layout = *MeshLayout::FromRankTable(RankTable{{0, 2}, {1, 3}},
                                           {"x", "y"});
  auto spans = *DimHostSpans(layout, kHostMajor);
  EXPECT_TRUE(spans[0].inside_host);
  EXPECT_EQ(spans[1].ToString(),
            "line 0,2 crosses hosts 'h0' (rank 0) and 'h1' (rank 2)");
  auto slice = *layout.Slice({"x"}, {0, 1});
  auto slice_spans = *DimHostSpans(slice, kHostMajor);
  ASSERT_EQ(slice_spans.size(), 1u);
  EXPECT_TRUE(slice_spans[0].inside_host);
}

TEST(DimHostSpansTest, BadHostTables) {
  auto layout = *MeshLayout::FromShape({2, 2}, {"dp", "tp"});
  auto short_table = DimHostSpans(layout, std::vector<std::string>{"a", "b"});
  EXPECT_EQ(short_table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_table.status().message()),
              HasSubstr("rank 2 of the mesh has no host"));
  auto empty_name =
      DimHostSpans(layout, std::vector<std::string>{"a", "", "b", "b"});
  EXPECT_EQ(empty_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty_name.status().message(), "rank 1 has an empty host name");
}

TEST(CheckDimsInsideHostTest, MessagesNameDimLineAndHosts) {
  auto layout = *MeshLayout::FromShape({2, 2}, {"tp", "dp"});
  EXPECT_TRUE(CheckDimsInsideHost(layout, kHostMajor, {"dp"}).ok());
  EXPECT_TRUE(CheckDimsInsideHost(layout, kHostMajor, {}).ok());
  absl::Status s = CheckDimsInsideHost(layout, kHostMajor, {"dp", "tp"});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "dim 'tp' must stay inside one host "
            "(MeshOptions.require_inside_host) but its line 0,2 crosses "
            "hosts 'h0' (rank 0) and 'h1' (rank 2)");
  absl::Status unknown = CheckDimsInsideHost(layout, kHostMajor, {"pp"});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(),
            "MeshOptions.require_inside_host names 'pp', which is not a dim "
            "of the mesh (dims: [tp, dp])");
}

// Rank 0 of a 4-rank job whose other ranks never come: no mesh agreement
// (device_mesh/mesh_agreement.h), which would wait for them.
std::shared_ptr<MeshRuntime> RuntimeWithoutHosts() {
  auto runtime = *MeshRuntime::Create(std::make_shared<InMemoryStore>(), 0,
                                      4, 0);
  runtime->SkipMeshAgreementForTesting();
  return runtime;
}

std::shared_ptr<MeshRuntime> RuntimeWithHosts(std::vector<std::string> hosts) {
  auto runtime = RuntimeWithoutHosts();
  runtime->SetHostInfo(std::move(hosts), "10.0.0.1");
  return runtime;
}

TEST(InitDeviceMeshInsideHostTest, RequirementHoldsOrFails) {
  MeshOptions options;
  options.require_inside_host = {"tp"};
  auto ok = InitDeviceMesh(RuntimeWithHosts(kHostMajor), "cpu", {2, 2},
                           {"dp", "tp"}, options);
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto spans = DimHostSpans(*ok);
  ASSERT_TRUE(spans.ok()) << spans.status();
  EXPECT_FALSE((*spans)[0].inside_host);
  EXPECT_TRUE((*spans)[1].inside_host);

  auto crossing = InitDeviceMesh(RuntimeWithHosts(kHostMajor), "cpu", {2, 2},
                                 {"tp", "dp"}, options);
  EXPECT_EQ(crossing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(crossing.status().message(),
            "dim 'tp' must stay inside one host "
            "(MeshOptions.require_inside_host) but its line 0,2 crosses "
            "hosts 'h0' (rank 0) and 'h1' (rank 2)");
  // Without the requirement the same mesh is made, and reports the crossing.
  auto unchecked = InitDeviceMesh(RuntimeWithHosts(kHostMajor), "cpu", {2, 2},
                                  {"tp", "dp"});
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
  EXPECT_FALSE((*DimHostSpans(*unchecked))[0].inside_host);
}

TEST(InitDeviceMeshInsideHostTest, UnknownHostsAndUnknownDim) {
  MeshOptions options;
  options.require_inside_host = {"tp"};
  auto no_hosts = InitDeviceMesh(RuntimeWithoutHosts(), "cpu", {2, 2},
                                 {"dp", "tp"}, options);
  EXPECT_EQ(no_hosts.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_hosts.status().message()),
              HasSubstr("needs the ranks' hosts"));
  options.require_inside_host = {"pp"};
  auto unknown = InitDeviceMesh(RuntimeWithHosts(kHostMajor), "cpu", {2, 2},
                                {"dp", "tp"}, options);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  auto no_runtime_hosts = DimHostSpans(
      *InitDeviceMesh(RuntimeWithoutHosts(), "cpu", {2, 2}, {"dp", "tp"}));
  EXPECT_EQ(no_runtime_hosts.status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace devmesh
