// Review probes (issues 10/12): bad input to InferMeshShape that once
// overflowed the product of the other sizes (signed overflow, then a
// division by zero on the wrapped product).
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/auto_shape.h"

namespace devmesh {
namespace {

using ::testing::HasSubstr;

TEST(InferMeshShapeReview, HugeSizesAreInvalidArgumentNotOverflow) {
  // 4 * 2^62 wraps to 0 in int64: must be InvalidArgument, not SIGFPE.
  absl::StatusOr<std::vector<int64_t>> s =
      InferMeshShape({-1, 4, int64_t{1} << 62}, 12);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
      << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("world size 12"));
  s = InferMeshShape({3, INT64_MAX, -1}, 12);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
      << s.status();
  s = InferMeshShape({-1, int64_t{1} << 32, int64_t{1} << 32}, 12);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
      << s.status();
  // Sizes whose product is exactly the world still infer 1.
  EXPECT_EQ(*InferMeshShape({-1, 3, 4}, 12), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(*InferMeshShape({2, -1, 3}, 12), (std::vector<int64_t>{2, 2, 3}));
}

}  // namespace
}  // namespace devmesh
