// MeshLayout::SliceWithExtraDims: flattened dims mixed with a mesh's own
// dims in any order, on the root, a transpose, a slice and a deserialized
// copy, with the issue's literal example; overlap errors name both dims.
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
using ::testing::HasSubstr;
using Ranks = std::vector<int64_t>;
using Names = std::vector<std::string>;

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 const std::string& part) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(part));
}

class FlattenedSelect : public ::testing::Test {
 protected:
  // (2, 3, 2) named (pp, dp, tp) over 12 ranks; "pt" = flatten of (pp, tp)
  // sliced through rank 7: [0, 1, 6, 7].
  MeshLayout root_ = Ok(MeshLayout::FromShape({2, 3, 2}, {"pp", "dp", "tp"}));
  MeshLayout pt_ =
      Ok(Ok(root_.SliceThroughRank({"pp", "tp"}, 7)).Flatten("pt"));
};

TEST_F(FlattenedSelect, IssueExampleOnEveryRank) {
  ASSERT_EQ(pt_.RankTable(), (Ranks{0, 1, 6, 7}));
  for (int64_t rank = 0; rank < 12; ++rank) {
    MeshLayout m =
        Ok(root_.SliceWithExtraDims(Names{"dp", "pt"}, {pt_}, rank));
    EXPECT_EQ(m.shape(), (Ranks{3, 4}));
    EXPECT_EQ(m.RankTable(),
              (Ranks{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
    EXPECT_EQ(m.dim_names(), (Names{"dp", "pt"}));
    // The other order is the transpose.
    MeshLayout t =
        Ok(root_.SliceWithExtraDims(Names{"pt", "dp"}, {pt_}, rank));
    EXPECT_EQ(t, Ok(m.Transpose({1, 0})));
  }
  // "pt" alone through rank 7, and through rank 3 (the line [2,3,8,9]).
  EXPECT_EQ(Ok(root_.SliceWithExtraDims(Names{"pt"}, {pt_}, 7)).RankTable(),
            (Ranks{0, 1, 6, 7}));
  MeshLayout pt3 = Ok(root_.SliceWithExtraDims(Names{"pt"}, {pt_}, 3));
  EXPECT_EQ(pt3.RankTable(), (Ranks{2, 3, 8, 9}));
  EXPECT_EQ(pt3.CoordinateOf(9), (std::vector<int64_t>{3}));
  EXPECT_EQ(Ok(pt3.GroupOf(9, 0)), (Ranks{2, 3, 8, 9}));
  // The group key of "pt" is the same whichever mesh it is selected from.
  EXPECT_EQ(pt3.DimModesString(0), pt_.DimModesString(0));
}

TEST_F(FlattenedSelect, OnTransposeSliceAndBytes) {
  MeshLayout t = Ok(root_.Transpose({2, 1, 0}));  // (tp, dp, pp)
  EXPECT_EQ(Ok(t.SliceWithExtraDims(Names{"dp", "pt"}, {pt_}, 5)).RankTable(),
            (Ranks{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
  // A slice holding pp and tp resolves pt; one without tp cannot.
  MeshLayout pp_tp = Ok(root_.SliceThroughRank({"tp", "pp"}, 4));  // dp = 2
  EXPECT_EQ(Ok(pp_tp.SliceWithExtraDims(Names{"pt"}, {pt_}, 4)).RankTable(),
            (Ranks{4, 5, 10, 11}));
  MeshLayout dp_pp = Ok(root_.SliceThroughRank({"dp", "pp"}, 4));
  ExpectError(dp_pp.SliceWithExtraDims(Names{"pt"}, {pt_}, 4).status(),
              absl::StatusCode::kInvalidArgument, "outside the mesh");
  // Serialized and read back: a root equal by value.
  MeshLayout back = Ok(MeshLayout::Deserialize(root_.Serialize()));
  MeshLayout pt_back = Ok(MeshLayout::Deserialize(pt_.Serialize()));
  EXPECT_EQ(
      Ok(back.SliceWithExtraDims(Names{"dp", "pt"}, {pt_back}, 0)).RankTable(),
      (Ranks{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
  // A size-1 dim next to a flattened one (PyTorch's mesh["dp_shard_cp", "tp"]
  // on meshes with size-1 dims).
  MeshLayout r1 = Ok(MeshLayout::FromShape({1, 2, 4}, {"cp", "dp", "tp"}));
  MeshLayout dc = Ok(Ok(r1.Slice({"dp", "cp"})).Flatten("dp_cp"));
  MeshLayout sel = Ok(r1.SliceWithExtraDims(Names{"dp_cp", "tp"}, {dc}, 5));
  EXPECT_EQ(sel.shape(), (Ranks{2, 4}));
  EXPECT_EQ(sel.RankTable(), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(FlattenedSelect, Errors) {
  absl::Status s =
      root_.SliceWithExtraDims(Names{"pt", "pp"}, {pt_}, 0).status();
  ExpectError(s, absl::StatusCode::kInvalidArgument, "'pt' and 'pp' overlap");
  ExpectError(root_.SliceWithExtraDims(Names{"tp", "pt"}, {pt_}, 0).status(),
              absl::StatusCode::kInvalidArgument, "'tp' and 'pt' overlap");
  ExpectError(root_.SliceWithExtraDims(Names{"pt", "pt"}, {pt_}, 0).status(),
              absl::StatusCode::kInvalidArgument, "appears twice");
  ExpectError(root_.SliceWithExtraDims(Names{}, {pt_}, 0).status(),
              absl::StatusCode::kInvalidArgument, "at least one");
  s = root_.SliceWithExtraDims(Names{"xx"}, {pt_}, 0).status();
  ExpectError(s, absl::StatusCode::kNotFound, "'xx' not found");
  EXPECT_THAT(std::string(s.message()), HasSubstr("(pp, dp, tp, pt)"));
  MeshLayout other = Ok(MeshLayout::FromShape({4, 3}, {"a", "b"}));
  MeshLayout ab = Ok(other.Flatten("ab"));
  ExpectError(root_.SliceWithExtraDims(Names{"ab"}, {ab}, 0).status(),
              absl::StatusCode::kInvalidArgument, "not of the root");
  MeshLayout unnamed = Ok(MeshLayout::FromShape({2, 2}));
  ExpectError(unnamed.SliceWithExtraDims(Names{"a"}, {}, 0).status(),
              absl::StatusCode::kFailedPrecondition, "no dim names");
}

}  // namespace
}  // namespace devmesh
