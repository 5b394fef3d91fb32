// Factories (R1, R2) and queries of MeshLayout, and every validation error
// with its code and a message that names the bad value.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"
#include "tests/mesh/reference_mesh.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Ok;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

using Ranks = std::vector<int64_t>;

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 const std::string& part) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(part));
}

TEST(FromShape, RowMajorRanksAndQueries) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  EXPECT_EQ(m.ndim(), 2);
  EXPECT_THAT(m.shape(), ElementsAre(2, 4));
  EXPECT_EQ(m.numel(), 8);
  EXPECT_EQ(Ok(m.size(1)), 4);
  EXPECT_EQ(Ok(m.size("dp")), 2);
  EXPECT_THAT(m.dim_names(), ElementsAre("dp", "tp"));
  EXPECT_EQ(Ok(m.DimIndex("tp")), 1);
  EXPECT_EQ(m.RankTable(), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m.NestedRanks(), (RankTable{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(Ok(m.RankAt({1, 2})), 6);
  EXPECT_THAT(m.CoordinateOf(6), Optional(ElementsAre(1, 2)));
  EXPECT_EQ(m.CoordinateOf(8), std::nullopt);
  EXPECT_EQ(m.CoordinateOf(-1), std::nullopt);
  EXPECT_TRUE(m.ContainsRank(7));
  EXPECT_FALSE(m.ContainsRank(8));
  EXPECT_EQ(Ok(m.GroupOf(5, 0)), (Ranks{1, 5}));
  EXPECT_EQ(Ok(m.GroupOf(5, 1)), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(Ok(m.NumGroups(0)), 4);
  EXPECT_EQ(Ok(m.NumGroups(1)), 2);
  EXPECT_EQ(m.DimModesString(0), "(2:4)");
  EXPECT_EQ(m.DimModesString(1), "(4:1)");
  EXPECT_EQ(m.DimModesString(2), "");
  EXPECT_EQ(m.root_dims(), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_TRUE(m.IsRoot());
  EXPECT_FALSE(m.is_explicit());
  EXPECT_EQ(m.LayoutString(), "[dp,tp](2,4):(4,1)+0");
}

TEST(FromShape, SplitColorKeyIsLineBaseAndIndex) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  EXPECT_EQ(Ok(m.SplitColorKey(6, 0)), (ColorKey{2, 1}));
  EXPECT_EQ(Ok(m.SplitColorKey(6, 1)), (ColorKey{4, 2}));
  EXPECT_EQ(Ok(m.SplitColorKey(8, 1)), (ColorKey{-1, 0}));
  EXPECT_EQ(Ok(m.SplitColorKey(-5, 0)), (ColorKey{-1, 0}));
}

TEST(FromShape, RootLineOfIsTheLineThroughAnyRootRank) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  EXPECT_EQ(Ok(m.RootLineOf(6, 0)), (Ranks{2, 6}));
  EXPECT_EQ(Ok(m.RootLineOf(6, 1)), (Ranks{4, 5, 6, 7}));
  // A slice: rank 1 is outside the dp=1 row but still has its own tp line.
  MeshLayout row = Ok(m.SliceThroughRank({"tp"}, 5));
  EXPECT_EQ(Ok(row.RootLineOf(1, 0)), (Ranks{0, 1, 2, 3}));
  EXPECT_EQ(Ok(row.RootLineOf(5, 0)), (Ranks{4, 5, 6, 7}));
  ExpectError(m.RootLineOf(8, 1).status(), absl::StatusCode::kNotFound,
              "rank 8 is not part of the root");
  ExpectError(m.RootLineOf(0, 2).status(), absl::StatusCode::kOutOfRange,
              "");
}

TEST(FromShape, UnnamedAndSizeOne) {
  MeshLayout m = Ok(MeshLayout::FromShape({1, 3, 1}));
  EXPECT_TRUE(m.dim_names().empty());
  EXPECT_EQ(m.RankTable(), (Ranks{0, 1, 2}));
  EXPECT_EQ(m.LayoutString(), "(1,3,1):(0,1,0)+0");
  EXPECT_EQ(Ok(m.GroupOf(2, 0)), (Ranks{2}));
  EXPECT_EQ(Ok(m.GroupOf(2, 1)), (Ranks{0, 1, 2}));
  EXPECT_EQ(Ok(m.SplitColorKey(2, 2)), (ColorKey{2, 0}));
  EXPECT_EQ(m.DimModesString(0), "(1:0)");
  EXPECT_THAT(m.CoordinateOf(1), Optional(ElementsAre(0, 1, 0)));
}

TEST(FromShape, Errors) {
  ExpectError(MeshLayout::FromShape({}).status(),
              absl::StatusCode::kInvalidArgument, "()");
  ExpectError(MeshLayout::FromShape({2, 0}).status(),
              absl::StatusCode::kInvalidArgument, "size 0");
  ExpectError(MeshLayout::FromShape({2, -3}).status(),
              absl::StatusCode::kInvalidArgument, "-3");
  ExpectError(MeshLayout::FromShape({int64_t{1} << 40, int64_t{1} << 40}).status(),
              absl::StatusCode::kInvalidArgument, "1099511627776");
  ExpectError(MeshLayout::FromShape({2, 4}, {"dp"}).status(),
              absl::StatusCode::kInvalidArgument, "(dp)");
  ExpectError(MeshLayout::FromShape({2, 4}, {"dp", "dp"}).status(),
              absl::StatusCode::kInvalidArgument, "'dp'");
  ExpectError(MeshLayout::FromShape({2, 4}, {"dp", ""}).status(),
              absl::StatusCode::kInvalidArgument, "(dp, )");
  ExpectError(MeshLayout::FromShape(std::vector<int64_t>(65, 1)).status(),
              absl::StatusCode::kInvalidArgument, "65");
}

TEST(FromRankTable, ExplicitTableQueries) {
  MeshLayout m = Ok(MeshLayout::FromRankTable({{3, 1}, {0, 2}}, {"x", "y"}));
  EXPECT_TRUE(m.is_explicit());
  EXPECT_EQ(m.RankTable(), (Ranks{3, 1, 0, 2}));
  EXPECT_EQ(m.NestedRanks(), (RankTable{{3, 1}, {0, 2}}));
  EXPECT_THAT(m.CoordinateOf(2), Optional(ElementsAre(1, 1)));
  EXPECT_EQ(m.CoordinateOf(4), std::nullopt);
  EXPECT_EQ(Ok(m.GroupOf(1, 0)), (Ranks{1, 2}));
  EXPECT_EQ(Ok(m.GroupOf(0, 1)), (Ranks{0, 2}));
  EXPECT_EQ(Ok(m.SplitColorKey(2, 0)), (ColorKey{1, 1}));
  EXPECT_EQ(Ok(m.SplitColorKey(1, 0)), (ColorKey{1, 0}));
  EXPECT_EQ(Ok(m.SplitColorKey(4, 0)), (ColorKey{-1, 0}));
  EXPECT_EQ(m.LayoutString(), "[x,y](2,2):(2,1)+0 @table");
}

TEST(FromRankTable, ScalarIsOneRankMesh) {
  MeshLayout m = Ok(MeshLayout::FromRankTable(7));
  EXPECT_THAT(m.shape(), ElementsAre(1));
  EXPECT_EQ(m.RankTable(), (Ranks{7}));
  MeshLayout l = Ok(MeshLayout::FromRankTable({7}));
  EXPECT_EQ(m, l);
}

TEST(FromRankTable, SparseRanksUseHashIndex) {
  MeshLayout m = Ok(MeshLayout::FromRankTable({{1000000, 5}, {77, 3000000}}));
  EXPECT_THAT(m.CoordinateOf(3000000), Optional(ElementsAre(1, 1)));
  EXPECT_EQ(m.CoordinateOf(6), std::nullopt);
  EXPECT_EQ(Ok(m.GroupOf(77, 1)), (Ranks{77, 3000000}));
}

TEST(FromRankTable, Errors) {
  ExpectError(MeshLayout::FromRankTable({{0, 1}, {2}}).status(),
              absl::StatusCode::kInvalidArgument, "mesh[1] has 1 items");
  ExpectError(MeshLayout::FromRankTable(RankTable(std::vector<RankTable>{}))
                  .status(),
              absl::StatusCode::kInvalidArgument, "empty list at mesh");
  ExpectError(MeshLayout::FromRankTable({{0, 1}, {}}).status(),
              absl::StatusCode::kInvalidArgument, "empty list at mesh[1]");
  ExpectError(MeshLayout::FromRankTable({{0, 1}, 2}).status(),
              absl::StatusCode::kInvalidArgument, "mesh[1] is the rank 2");
  ExpectError(MeshLayout::FromRankTable({0, {1, 2}}).status(),
              absl::StatusCode::kInvalidArgument, "mesh[1] is a list");
  ExpectError(MeshLayout::FromRankTable({{0, -3}, {1, 2}}).status(),
              absl::StatusCode::kInvalidArgument, "rank -3 at [0][1]");
  ExpectError(MeshLayout::FromRankTable({{0, 1}, {1, 2}}).status(),
              absl::StatusCode::kInvalidArgument,
              "rank 1 appears twice, at [0][1] and [1][0]");
  ExpectError(MeshLayout::FromRankTable({{0, 1}, {2, 3}}, {"a"}).status(),
              absl::StatusCode::kInvalidArgument, "(a)");
  ExpectError(MeshLayout::FromRankTable({{0, 1}, {2, 3}}, {"a", "a"}).status(),
              absl::StatusCode::kInvalidArgument, "'a'");
  RankTable deep = 0;
  for (int i = 0; i < 70; ++i) deep = RankTable{deep};
  ExpectError(MeshLayout::FromRankTable(deep).status(),
              absl::StatusCode::kInvalidArgument, "64");
}

TEST(FromRanks, CountAndValues) {
  MeshLayout m = Ok(MeshLayout::FromRanks({5, 4, 3, 2, 1, 0}, {3, 2}));
  EXPECT_EQ(Ok(m.RankAt({2, 0})), 1);
  ExpectError(MeshLayout::FromRanks({0, 1, 2}, {2, 2}).status(),
              absl::StatusCode::kInvalidArgument, "3 ranks");
  ExpectError(MeshLayout::FromRanks({0, 1}, {2, 0}).status(),
              absl::StatusCode::kInvalidArgument, "size 0");
}

TEST(FromStrides, SeparableStaysStrided) {
  MeshLayout m = Ok(MeshLayout::FromStrides({2, 4}, {1, 2}, 3, {"a", "b"}));
  EXPECT_EQ(m.RankTable(), (Ranks{3, 5, 7, 9, 4, 6, 8, 10}));
  EXPECT_EQ(m.LayoutString(), "[a,b](2,4):(4,1)+0 @(2,4):(1,2)+3");
  EXPECT_THAT(m.CoordinateOf(8), Optional(ElementsAre(1, 2)));
  EXPECT_EQ(m.CoordinateOf(11), std::nullopt);
  EXPECT_EQ(m.CoordinateOf(2), std::nullopt);
  EXPECT_EQ(Ok(m.GroupOf(8, 0)), (Ranks{7, 8}));
  EXPECT_FALSE(m.is_explicit());
  // Row-major compact strides with offset 0 are a plain shape.
  EXPECT_EQ(Ok(MeshLayout::FromStrides({2, 4}, {4, 1})).LayoutString(),
            "(2,4):(4,1)+0");
  // Padded strides: ranks 0,1,2 and 10,11,12.
  MeshLayout padded = Ok(MeshLayout::FromStrides({2, 3}, {10, 1}));
  EXPECT_EQ(padded.RankTable(), (Ranks{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(padded.CoordinateOf(3), std::nullopt);
}

TEST(FromStrides, InjectiveButNotSeparableIsTable) {
  MeshLayout m = Ok(MeshLayout::FromStrides({3, 2}, {2, 3}));
  EXPECT_EQ(m.RankTable(), (Ranks{0, 3, 2, 5, 4, 7}));
  EXPECT_TRUE(m.is_explicit());
  EXPECT_THAT(m.CoordinateOf(4), Optional(ElementsAre(2, 0)));
}

TEST(FromStrides, Errors) {
  ExpectError(MeshLayout::FromStrides({2, 2}, {1, 1}).status(),
              absl::StatusCode::kInvalidArgument, "not injective");
  ExpectError(MeshLayout::FromStrides({2, 2}, {1, -1}).status(),
              absl::StatusCode::kInvalidArgument, "negative stride -1");
  ExpectError(MeshLayout::FromStrides({2, 2}, {2, 1}, -4).status(),
              absl::StatusCode::kInvalidArgument, "negative offset -4");
  ExpectError(MeshLayout::FromStrides({2, 0}, {2, 1}).status(),
              absl::StatusCode::kInvalidArgument, "size 0");
  ExpectError(MeshLayout::FromStrides({2, 2}, {1}).status(),
              absl::StatusCode::kInvalidArgument, "1 strides for 2 sizes");
  ExpectError(
      MeshLayout::FromStrides({4}, {int64_t{1} << 61}).status(),
      absl::StatusCode::kInvalidArgument, "2305843009213693952");
  ExpectError(MeshLayout::FromStrides({8192, 4096}, {2, 3}).status(),
              absl::StatusCode::kInvalidArgument, "(8192,4096):(2,3)+0");
  ExpectError(MeshLayout::FromStrides({2, 2}, {0, 1}).status(),
              absl::StatusCode::kInvalidArgument, "(2,2):(0,1)+0");
}

TEST(Queries, Errors) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  ExpectError(m.size(5).status(), absl::StatusCode::kOutOfRange, "5");
  ExpectError(m.size(-1).status(), absl::StatusCode::kOutOfRange, "-1");
  ExpectError(m.size("pp").status(), absl::StatusCode::kNotFound, "'pp'");
  ExpectError(m.DimIndex("zz").status(), absl::StatusCode::kNotFound, "'zz'");
  ExpectError(m.RankAt({1}).status(), absl::StatusCode::kInvalidArgument,
              "(1)");
  ExpectError(m.RankAt({1, 9}).status(), absl::StatusCode::kOutOfRange,
              "9 not in [0, 4)");
  ExpectError(m.RankAt({-1, 0}).status(), absl::StatusCode::kOutOfRange,
              "-1");
  ExpectError(m.GroupOf(99, 0).status(),
              absl::StatusCode::kFailedPrecondition, "rank 99");
  ExpectError(m.GroupOf(1, 2).status(), absl::StatusCode::kOutOfRange, "2");
  ExpectError(m.NumGroups(3).status(), absl::StatusCode::kOutOfRange, "3");
  ExpectError(m.SplitColorKey(0, 7).status(), absl::StatusCode::kOutOfRange,
              "7");
  MeshLayout unnamed = Ok(MeshLayout::FromShape({2}));
  ExpectError(unnamed.size("x").status(), absl::StatusCode::kNotFound, "'x'");
}

}  // namespace
}  // namespace devmesh
