// Slice, Flatten, Unflatten, Concatenate and Transpose (R8-R11) on 1-D to 4-D
// meshes against literal rank tables, layout strings and root dims, and every
// transform error with its code and the bad value in the message.
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

using Ranks = std::vector<int64_t>;
using RootDims = std::vector<std::vector<int>>;

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 const std::string& part) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(part));
}

TEST(Transforms1D, AllOps) {
  MeshLayout m = Ok(MeshLayout::FromShape({8}, {"x"}));
  EXPECT_EQ(Ok(m.Slice({"x"})), m);
  EXPECT_EQ(Ok(m.Flatten()), m);
  MeshLayout y = Ok(m.Flatten("y"));
  EXPECT_EQ(y.LayoutString(), "[y](8):(1)+0");
  EXPECT_EQ(y.RankTable(), m.RankTable());
  MeshLayout u = Ok(m.Unflatten(0, {2, 4}, {"a", "b"}));
  EXPECT_EQ(u.LayoutString(), "[a,b](2,4):(4,1)+0");
  EXPECT_EQ(u.root_dims(), (RootDims{{0}, {0}}));
  EXPECT_EQ(Ok(u.Slice({"a"}, {0, 3})).RankTable(), (Ranks{3, 7}));
  EXPECT_EQ(Ok(m.Transpose({0})), m);
}

TEST(Transforms2D, Slice) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  EXPECT_EQ(Ok(m.Slice({"tp"})).RankTable(), (Ranks{0, 1, 2, 3}));
  MeshLayout tp1 = Ok(m.Slice({"tp"}, {1, 0}));
  EXPECT_EQ(tp1.RankTable(), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(tp1.LayoutString(), "[tp](4):(1)+4");
  EXPECT_EQ(tp1.root_dims(), (RootDims{{1}}));
  EXPECT_EQ(Ok(m.Slice({"dp"}, {0, 2})).RankTable(), (Ranks{2, 6}));
  EXPECT_EQ(Ok(m.SliceThroughRank({"dp"}, 7)).RankTable(), (Ranks{3, 7}));
  // Not a member: through coordinate 0 (R8).
  EXPECT_EQ(Ok(m.SliceThroughRank({"dp"}, 42)).RankTable(), (Ranks{0, 4}));
  MeshLayout swapped = Ok(m.Slice({"tp", "dp"}));
  EXPECT_EQ(swapped.RankTable(), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_THAT(swapped.dim_names(), ElementsAre("tp", "dp"));
  EXPECT_EQ(Ok(m.Slice({"dp", "tp"}, {1, 3})), m);
  // A slice of a slice keeps the root and the root dims.
  MeshLayout again = Ok(tp1.Slice({"tp"}));
  EXPECT_EQ(again, tp1);
  EXPECT_TRUE(again.SameRoot(m));
  EXPECT_EQ(again.RootLayout(), m);
  EXPECT_FALSE(again.IsRoot());
}

TEST(Transforms2D, FlattenTransposeUnflatten) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  MeshLayout flat = Ok(m.Flatten());
  EXPECT_THAT(flat.dim_names(), ElementsAre("dp_tp"));
  EXPECT_EQ(flat.LayoutString(), "[dp_tp](8):(1)+0");
  EXPECT_EQ(flat.root_dims(), (RootDims{{0, 1}}));
  MeshLayout t = Ok(m.Transpose({1, 0}));
  EXPECT_EQ(t.RankTable(), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(t.LayoutString(), "[tp,dp](4,2):(1,4)+0");
  MeshLayout tf = Ok(t.Flatten());
  EXPECT_EQ(tf.RankTable(), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(tf.LayoutString(), "[tp_dp]((4,2)):((1,4))+0");
  EXPECT_EQ(tf.DimModesString(0), "(4:1,2:4)");
  EXPECT_EQ(tf.root_dims(), (RootDims{{1, 0}}));
  MeshLayout u = Ok(m.Unflatten(1, {2, 2}, {"a", "b"}));
  EXPECT_THAT(u.shape(), ElementsAre(2, 2, 2));
  EXPECT_EQ(u.RankTable(), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(u.LayoutString(), "[dp,a,b](2,2,2):(4,2,1)+0");
  EXPECT_EQ(u.root_dims(), (RootDims{{0}, {1}, {1}}));
  EXPECT_EQ(Ok(tf.Unflatten(0, {4, 2}, {"tp", "dp"})), t);
}

TEST(Transforms2D, GroupsAndColorsOfSlices) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  MeshLayout tp1 = Ok(m.Slice({"tp"}, {1, 0}));
  EXPECT_EQ(Ok(tp1.GroupOf(6, 0)), (Ranks{4, 5, 6, 7}));
  // Any root rank gets its line of the world split.
  EXPECT_EQ(Ok(tp1.SplitColorKey(2, 0)), (ColorKey{0, 2}));
  EXPECT_EQ(Ok(tp1.SplitColorKey(6, 0)), (ColorKey{4, 2}));
  EXPECT_EQ(tp1.DimModesString(0), m.DimModesString(1));
  EXPECT_NE(tp1.DimModesString(0), m.DimModesString(0));
  ExpectError(tp1.GroupOf(2, 0).status(),
              absl::StatusCode::kFailedPrecondition, "rank 2");
}

TEST(Transforms2D, Concatenate) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  MeshLayout dp = Ok(m.Slice({"dp"}, {0, 1}));
  MeshLayout tp = Ok(m.Slice({"tp"}, {1, 0}));
  MeshLayout both = Ok(MeshLayout::Concatenate({dp, tp}));
  EXPECT_EQ(both, m);
  MeshLayout rev = Ok(MeshLayout::Concatenate({tp, dp}));
  EXPECT_EQ(rev.RankTable(), (Ranks{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(rev.root_dims(), (RootDims{{1}, {0}}));
}

TEST(Transforms3D, SliceFlattenUnflattenConcatenate) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 3, 4}, {"a", "b", "c"}));
  MeshLayout ca = Ok(m.Slice({"c", "a"}, {0, 1, 0}));
  EXPECT_EQ(ca.RankTable(), (Ranks{4, 16, 5, 17, 6, 18, 7, 19}));
  EXPECT_EQ(ca.LayoutString(), "[c,a](4,2):(1,12)+4");
  MeshLayout ac = Ok(Ok(m.Slice({"a", "c"})).Flatten());
  EXPECT_EQ(ac.RankTable(), (Ranks{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(ac.LayoutString(), "[a_c]((2,4)):((12,1))+0");
  EXPECT_EQ(ac.root_dims(), (RootDims{{0, 2}}));
  MeshLayout xy = Ok(ac.Unflatten(0, {4, 2}, {"x", "y"}));
  EXPECT_EQ(xy.RankTable(), (Ranks{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(xy.LayoutString(), "[x,y]((2,2),2):((12,2),1)+0");
  EXPECT_EQ(xy.root_dims(), (RootDims{{0, 2}, {2}}));
  EXPECT_EQ(Ok(xy.Slice({"x"}, {0, 1})).RankTable(), (Ranks{1, 3, 13, 15}));
  MeshLayout back = Ok(ac.Unflatten(0, {2, 4}, {"a", "c"}));
  EXPECT_EQ(back, Ok(m.Slice({"a", "c"})));
  EXPECT_EQ(back.root_dims(), (RootDims{{0}, {2}}));
  MeshLayout cat = Ok(MeshLayout::Concatenate(
      {Ok(m.Slice({"a"})), Ok(m.Slice({"c"}, {0, 2, 0}))}));
  EXPECT_EQ(cat.RankTable(), (Ranks{0, 1, 2, 3, 12, 13, 14, 15}));
  MeshLayout cab = Ok(MeshLayout::Concatenate({ca, Ok(m.Slice({"b"}))}));
  EXPECT_THAT(cab.shape(), ElementsAre(4, 2, 3));
  EXPECT_EQ(Ok(cab.RankAt({3, 1, 2})), 3 + 12 + 8);
  // Groups along the flattened non-adjacent dim.
  EXPECT_EQ(Ok(ac.GroupOf(13, 0)), (Ranks{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(Ok(ac.SplitColorKey(21, 0)), (ColorKey{8, 5}));
}

TEST(Transforms4D, AllOps) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 2, 2, 2}, {"a", "b", "c", "d"}));
  MeshLayout db = Ok(m.Slice({"d", "b"}, {1, 0, 1, 0}));
  EXPECT_EQ(db.RankTable(), (Ranks{10, 14, 11, 15}));
  EXPECT_EQ(Ok(Ok(m.Slice({"a", "c"})).Flatten()).RankTable(),
            (Ranks{0, 2, 8, 10}));
  EXPECT_EQ(Ok(m.Transpose({3, 2, 1, 0})).RankTable(),
            (Ranks{0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15}));
  MeshLayout u = Ok(m.Unflatten(1, {1, 2}, {"b1", "b2"}));
  EXPECT_THAT(u.shape(), ElementsAre(2, 1, 2, 2, 2));
  EXPECT_EQ(u.root_dims(), (RootDims{{0}, {}, {1}, {2}, {3}}));
  EXPECT_EQ(u.RankTable(), m.RankTable());
  EXPECT_EQ(Ok(u.GroupOf(13, 1)), (Ranks{13}));
  MeshLayout flat = Ok(u.Flatten("all"));
  EXPECT_EQ(flat.LayoutString(), "[all](16):(1)+0");
  MeshLayout cat = Ok(MeshLayout::Concatenate({db, Ok(m.Slice({"c"}))}));
  EXPECT_EQ(cat.RankTable(), (Ranks{8, 10, 12, 14, 9, 11, 13, 15}));
}

TEST(TransformsExplicit, FollowTheTable) {
  MeshLayout m = Ok(MeshLayout::FromRankTable(
      {{{7, 6}, {5, 4}}, {{3, 2}, {1, 0}}}, {"a", "b", "c"}));
  EXPECT_EQ(Ok(m.Slice({"c", "a"}, {0, 1, 0})).RankTable(),
            (Ranks{5, 1, 4, 0}));
  EXPECT_EQ(Ok(Ok(m.Slice({"a", "c"})).Flatten()).RankTable(),
            (Ranks{7, 6, 3, 2}));
  EXPECT_EQ(Ok(m.SliceThroughRank({"b"}, 2)).RankTable(), (Ranks{2, 0}));
  EXPECT_EQ(Ok(Ok(m.Flatten()).Unflatten(0, {4, 2}, {"x", "y"})).RankTable(),
            (Ranks{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(Ok(m.Slice({"b", "c"}, {1, 0, 0})).LayoutString(),
            "[b,c](2,2):(2,1)+4 @table");
}

TEST(TransformErrors, Slice) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  ExpectError(Ok(MeshLayout::FromShape({2, 4})).Slice({"dp"}).status(),
              absl::StatusCode::kFailedPrecondition, "(dp)");
  ExpectError(m.Slice({}).status(), absl::StatusCode::kInvalidArgument,
              "at least one");
  ExpectError(m.Slice({"dp", "dp"}).status(),
              absl::StatusCode::kInvalidArgument, "'dp' appears twice");
  ExpectError(m.Slice({"pp"}).status(), absl::StatusCode::kNotFound, "'pp'");
  ExpectError(m.Slice({"dp"}, {0}).status(),
              absl::StatusCode::kInvalidArgument, "(0)");
  ExpectError(m.Slice({"dp"}, {0, 4}).status(), absl::StatusCode::kOutOfRange,
              "4 not in [0, 4)");
  ExpectError(m.SliceDims({2}).status(), absl::StatusCode::kOutOfRange, "2");
  ExpectError(m.SliceDims({1, 1}).status(),
              absl::StatusCode::kInvalidArgument, "(1, 1)");
}

TEST(TransformErrors, FlattenUnflattenTranspose) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  ExpectError(Ok(MeshLayout::FromShape({2, 4})).Flatten().status(),
              absl::StatusCode::kFailedPrecondition, "(2, 4)");
  ExpectError(m.Flatten("").status(), absl::StatusCode::kInvalidArgument,
              "non-empty");
  ExpectError(m.Unflatten(7, {2}, {"x"}).status(),
              absl::StatusCode::kOutOfRange, "7");
  ExpectError(m.Unflatten(1, {}, {}).status(),
              absl::StatusCode::kInvalidArgument, "()");
  ExpectError(m.Unflatten(1, {4, 0}, {"a", "b"}).status(),
              absl::StatusCode::kInvalidArgument, "contain 0");
  ExpectError(m.Unflatten(1, {3, 3}, {"a", "b"}).status(),
              absl::StatusCode::kInvalidArgument, "(3, 3)");
  ExpectError(m.Unflatten(1, {2, 2}, {"a"}).status(),
              absl::StatusCode::kInvalidArgument, "(a)");
  ExpectError(m.Unflatten(1, {2, 2}, {"dp", "b"}).status(),
              absl::StatusCode::kInvalidArgument, "'dp'");
  ExpectError(Ok(MeshLayout::FromShape({4})).Unflatten(0, {2, 2}, {"a", "b"})
                  .status(),
              absl::StatusCode::kInvalidArgument, "(a, b)");
  // (3:1,2:3) cannot be cut into (2,3): 3 does not divide 2 nor 2 divide 3.
  MeshLayout t = Ok(Ok(Ok(MeshLayout::FromShape({2, 3}, {"a", "b"}))
                          .Transpose({1, 0}))
                        .Flatten());
  EXPECT_EQ(t.DimModesString(0), "(3:1,2:3)");
  ExpectError(t.Unflatten(0, {2, 3}, {"x", "y"}).status(),
              absl::StatusCode::kInvalidArgument, "(3:1,2:3)");
  ExpectError(m.Transpose({0, 0}).status(),
              absl::StatusCode::kInvalidArgument, "(0, 0)");
  ExpectError(m.Transpose({1}).status(), absl::StatusCode::kInvalidArgument,
              "(1)");
}

TEST(TransformErrors, Concatenate) {
  MeshLayout m = Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"}));
  MeshLayout other = Ok(MeshLayout::FromShape({2, 4}, {"x", "y"}));
  ExpectError(MeshLayout::Concatenate({}).status(),
              absl::StatusCode::kInvalidArgument, "at least one");
  ExpectError(
      MeshLayout::Concatenate({Ok(m.Slice({"dp"})), Ok(other.Slice({"y"}))})
          .status(),
      absl::StatusCode::kFailedPrecondition, "[y](4):(1)+0");
  ExpectError(MeshLayout::Concatenate({Ok(m.Slice({"dp"})), m}).status(),
              absl::StatusCode::kInvalidArgument, "root dim 0");
  ExpectError(
      MeshLayout::Concatenate({Ok(m.Slice({"tp"})), Ok(m.Flatten())}).status(),
      absl::StatusCode::kInvalidArgument, "root dim 1");
  MeshLayout unnamed = Ok(MeshLayout::FromShape({2, 4}));
  ExpectError(
      MeshLayout::Concatenate({Ok(unnamed.SliceDims({0}))}).status(),
      absl::StatusCode::kInvalidArgument, "(2):(4)+0");
  MeshLayout u = Ok(m.Unflatten(1, {2, 2}, {"a", "b"}));
  ExpectError(MeshLayout::Concatenate({Ok(u.Slice({"a"})), Ok(u.Slice({"b"}))})
                  .status(),
              absl::StatusCode::kInvalidArgument, "root dim 1");
}

}  // namespace
}  // namespace devmesh
