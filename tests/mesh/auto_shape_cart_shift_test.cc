// InferMeshShape (one -1 dim, MPI_Dims_create-like) and CartShift
// (MPI_Cart_shift) on the issue's literal examples, on the root, a
// transpose, a slice and a deserialized copy, plus every error (sizes
// whose product overflows int64 included).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/auto_shape.h"
#include "mesh/cart_shift.h"
#include "mesh/mesh_layout.h"
#include "tests/mesh/reference_mesh.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Ok;
using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 const std::string& part) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(part));
}

TEST(InferMeshShape, IssueExamples) {
  EXPECT_EQ(Ok(InferMeshShape({-1, 4}, 12)), (Shape{3, 4}));
  EXPECT_EQ(Ok(InferMeshShape({2, -1, 2}, 12)), (Shape{2, 3, 2}));
  EXPECT_EQ(Ok(InferMeshShape({-1}, 7)), (Shape{7}));
  EXPECT_EQ(Ok(InferMeshShape({12, -1}, 12)), (Shape{12, 1}));
  // No -1: unchanged (the product is the caller's check).
  EXPECT_EQ(Ok(InferMeshShape({2, 5}, 12)), (Shape{2, 5}));
  absl::Status s = InferMeshShape({-1, 5}, 12).status();
  ExpectError(s, absl::StatusCode::kInvalidArgument, "world size 12");
  EXPECT_THAT(std::string(s.message()), HasSubstr("not divisible by 5"));
  ExpectError(InferMeshShape({-1, -1}, 12).status(),
              absl::StatusCode::kInvalidArgument, "more than one -1");
  ExpectError(InferMeshShape({-1, 0}, 12).status(),
              absl::StatusCode::kInvalidArgument, "holds 0 at dim 1");
  ExpectError(InferMeshShape({-2, 3}, 12).status(),
              absl::StatusCode::kInvalidArgument, "holds -2 at dim 0");
  ExpectError(InferMeshShape({-1, 24}, 12).status(),
              absl::StatusCode::kInvalidArgument, "not divisible by 24");
  ExpectError(InferMeshShape({-1}, 0).status(),
              absl::StatusCode::kInvalidArgument, "world size 0");
  // Huge sizes do not overflow: the product stops growing past the world.
  ExpectError(
      InferMeshShape({-1, int64_t{1} << 40, int64_t{1} << 40}, 12).status(),
      absl::StatusCode::kInvalidArgument, "world size 12");
}

struct Want {
  std::optional<int64_t> src, dst, src_in_group, dst_in_group;
};

void ExpectShift(const MeshLayout& m, int64_t rank, int dim, int64_t k,
                 bool periodic, Want want) {
  Neighbours n = Ok(CartShift(m, rank, dim, k, periodic));
  EXPECT_EQ(n.source, want.src) << "rank " << rank << " k " << k;
  EXPECT_EQ(n.destination, want.dst) << "rank " << rank << " k " << k;
  EXPECT_EQ(n.source_in_group, want.src_in_group) << "rank " << rank;
  EXPECT_EQ(n.destination_in_group, want.dst_in_group) << "rank " << rank;
}

// Sizes whose product overflows int64 once wrapped to 0 (signed overflow,
// then a division by zero): InvalidArgument naming the world size.
TEST(InferMeshShape, HugeSizesAreInvalidArgumentNotOverflow) {
  // 4 * 2^62 wraps to 0 in int64.
  ExpectError(InferMeshShape({-1, 4, int64_t{1} << 62}, 12).status(),
              absl::StatusCode::kInvalidArgument, "world size 12");
  ExpectError(InferMeshShape({3, INT64_MAX, -1}, 12).status(),
              absl::StatusCode::kInvalidArgument, "world size 12");
  ExpectError(
      InferMeshShape({-1, int64_t{1} << 32, int64_t{1} << 32}, 12).status(),
      absl::StatusCode::kInvalidArgument, "world size 12");
  // Sizes whose product is exactly the world still infer.
  EXPECT_EQ(Ok(InferMeshShape({-1, 3, 4}, 12)), (Shape{1, 3, 4}));
  EXPECT_EQ(Ok(InferMeshShape({2, -1, 3}, 12)), (Shape{2, 2, 3}));
}

TEST(CartShift, IssueExamplesOnRootTransposeSliceAndBytes) {
  MeshLayout root = Ok(MeshLayout::FromShape({2, 4}, {"dp", "pp"}));
  MeshLayout t = Ok(root.Transpose({1, 0}));
  MeshLayout back = Ok(MeshLayout::Deserialize(root.Serialize()));
  for (const auto& [m, pp] : {std::pair<MeshLayout, int>{root, 1},
                              {t, 0},
                              {back, 1}}) {
    ExpectShift(m, 5, pp, 1, false, {4, 6, 0, 2});
    ExpectShift(m, 7, pp, 1, false, {6, std::nullopt, 2, std::nullopt});
    ExpectShift(m, 7, pp, 1, true, {6, 4, 2, 0});
    ExpectShift(m, 4, pp, -1, true, {5, 7, 1, 3});
    ExpectShift(m, 4, pp, -1, false, {5, std::nullopt, 1, std::nullopt});
    ExpectShift(m, 6, pp, 0, false, {6, 6, 2, 2});
    ExpectShift(m, 1, pp, 5, true, {0, 2, 0, 2});
    ExpectShift(m, 1, pp, 4, false,
                {std::nullopt, std::nullopt, std::nullopt, std::nullopt});
    ExpectShift(m, 1, pp, INT64_MIN, false,
                {std::nullopt, std::nullopt, std::nullopt, std::nullopt});
    ExpectShift(m, 1, pp, INT64_MIN, true, {1, 1, 1, 1});  // 4 divides it
    ExpectShift(m, 6, 1 - pp, 1, false, {2, std::nullopt, 0, std::nullopt});
    ExpectShift(m, 6, 1 - pp, 1, true, {2, 2, 0, 0});
  }
  // A slice: the pp line through rank 6 is [4,5,6,7].
  MeshLayout pp = Ok(root.SliceThroughRank({"pp"}, 6));
  ExpectShift(pp, 5, 0, 1, false, {4, 6, 0, 2});
  ExpectShift(pp, 7, 0, 1, true, {6, 4, 2, 0});
  ExpectError(CartShift(pp, 1, 0, 1, false).status(),
              absl::StatusCode::kFailedPrecondition, "rank 1 is not in");
  ExpectError(CartShift(root, 1, 2, 1, false).status(),
              absl::StatusCode::kOutOfRange, "2");
}

TEST(CartShift, ExplicitTableKeepsItsOrder) {
  MeshLayout m = Ok(MeshLayout::FromRankTable(
      RankTable(std::vector<RankTable>{RankTable::List({3, 1, 0, 2})}), {"dp", "pp"}));
  ExpectShift(m, 1, 1, 1, false, {3, 0, 0, 2});
  ExpectShift(m, 2, 1, 1, true, {0, 3, 2, 0});
}

}  // namespace
}  // namespace devmesh
