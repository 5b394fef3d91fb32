// devmesh/tests/comm/gloo_split_test.cc
// Split of 2x2 and 2x4 grids into rows and columns, collectives inside each
// child, kNoColor, key ordering and nested splits; real processes.
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

#define RETURN_IF_ERROR_T(expr) \
  do {                          \
    absl::Status _s = (expr);   \
    if (!_s.ok()) return _s;    \
  } while (0)

absl::StatusOr<std::unique_ptr<Communicator>> World(
    int rank, int size, std::shared_ptr<Store> store) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  return CreateCommunicator("gloo", std::move(store), rank, size, options);
}

// Checks that `child` is the group `members` (global ranks, in order) seen
// from global rank `me`, then runs an all-reduce and an all-gather in it.
absl::Status CheckGroup(const std::string& name, Communicator& child,
                        const std::vector<int>& members, int me) {
  const std::vector<int>& got = child.global_ranks();
  if (got != members) {
    return absl::InternalError(absl::StrCat(
        name, ": global ranks [", absl::StrJoin(got, ","), "], expected [",
        absl::StrJoin(members, ","), "]"));
  }
  const int expected_rank = static_cast<int>(
      std::find(members.begin(), members.end(), me) - members.begin());
  if (child.rank() != expected_rank ||
      child.size() != static_cast<int>(members.size())) {
    return absl::InternalError(absl::StrCat(name, ": rank ", child.rank(),
                                            " size ", child.size()));
  }
  int64_t mine = 100 + me;
  int64_t sum = 0;
  RETURN_IF_ERROR_T(
      child.AllReduce(&mine, &sum, 1, DataType::kInt64, ReduceOp::kSum));
  int64_t expected_sum = 0;
  for (int g : members) expected_sum += 100 + g;
  if (sum != expected_sum) {
    return absl::InternalError(
        absl::StrCat(name, ": sum ", sum, ", expected ", expected_sum));
  }
  int32_t my_global = me;
  std::vector<int32_t> gathered(members.size(), -1);
  RETURN_IF_ERROR_T(
      child.AllGather(&my_global, gathered.data(), 1, DataType::kInt32));
  if (std::vector<int>(gathered.begin(), gathered.end()) != members) {
    return absl::InternalError(absl::StrCat(
        name, ": all-gather [", absl::StrJoin(gathered, ","), "]"));
  }
  return absl::OkStatus();
}

// rows x cols grid, rank = row * cols + col.
absl::Status RowsAndColumns(int rank, int size, std::shared_ptr<Store> store,
                            int cols) {
  auto world = World(rank, size, store);
  if (!world.ok()) return world.status();
  const int row = rank / cols, col = rank % cols;
  auto row_comm = (*world)->Split(/*color=*/row, /*key=*/col);
  if (!row_comm.ok()) return row_comm.status();
  auto col_comm = (*world)->Split(/*color=*/col, /*key=*/row);
  if (!col_comm.ok()) return col_comm.status();
  if (*row_comm == nullptr || *col_comm == nullptr) {
    return absl::InternalError("a colored rank got no child");
  }
  std::vector<int> row_members, col_members;
  for (int c = 0; c < cols; ++c) row_members.push_back(row * cols + c);
  for (int r = 0; r < size / cols; ++r) col_members.push_back(r * cols + col);
  RETURN_IF_ERROR_T(CheckGroup("row", **row_comm, row_members, rank));
  RETURN_IF_ERROR_T(CheckGroup("column", **col_comm, col_members, rank));
  // The parent still works after the splits.
  RETURN_IF_ERROR_T((*world)->Barrier());
  return absl::OkStatus();
}

TEST(GlooSplitTest, Grid2x2IntoRowsAndColumns) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    return RowsAndColumns(rank, size, std::move(store), /*cols=*/2);
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GlooSplitTest, Grid2x4IntoRowsAndColumns) {
  absl::Status status = ForkRanks(8, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    return RowsAndColumns(rank, size, std::move(store), /*cols=*/4);
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GlooSplitTest, NoColorGetsNullptrAndOthersFormAGroup) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = World(rank, size, store);
    if (!world.ok()) return world.status();
    const bool joins = rank % 2 == 0;
    auto child = (*world)->Split(joins ? 7 : kNoColor, rank);
    if (!child.ok()) return child.status();
    if (!joins) {
      return *child == nullptr
                 ? absl::OkStatus()
                 : absl::InternalError("kNoColor rank got a child");
    }
    if (*child == nullptr) return absl::InternalError("colored rank got none");
    return CheckGroup("even ranks", **child, {0, 2}, rank);
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GlooSplitTest, KeyOrdersTheChildAndTiesGoByParentRank) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = World(rank, size, store);
    if (!world.ok()) return world.status();
    // Keys 1, 1, 0, 0: order is (0, 2), (0, 3), (1, 0), (1, 1).
    auto child = (*world)->Split(0, rank < 2 ? 1 : 0);
    if (!child.ok()) return child.status();
    return CheckGroup("by key", **child, {2, 3, 0, 1}, rank);
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GlooSplitTest, NestedSplitKeepsWorldRanks) {
  absl::Status status = ForkRanks(8, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = World(rank, size, store);
    if (!world.ok()) return world.status();
    auto half = (*world)->Split(rank / 4, rank);  // {0..3}, {4..7}
    if (!half.ok()) return half.status();
    auto pair = (*half)->Split((*half)->rank() / 2, 0);  // pairs
    if (!pair.ok()) return pair.status();
    const int base = rank / 2 * 2;
    return CheckGroup("pair", **pair, {base, base + 1}, rank);
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GlooSplitTest, SplitOptionsGiveTheChildItsOwnTimeout) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = World(rank, size, store);  // 60 s
    if (!world.ok()) return world.status();
    SplitOptions bad;
    bad.timeout = absl::ZeroDuration();
    auto refused = (*world)->Split(0, rank, bad);
    if (refused.status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError(
          absl::StrCat("zero timeout gave ", refused.status().ToString()));
    }
    SplitOptions own;
    own.timeout = absl::Milliseconds(300);
    auto child = (*world)->Split(0, rank, own);
    if (!child.ok()) return child.status();
    if (absl::Status s = CheckGroup("child", **child, {0, 1}, rank); !s.ok()) {
      return s;
    }
    if (rank == 1) {
      // Never sends; stays up well past the child's timeout.
      absl::SleepFor(absl::Seconds(3));
      return absl::OkStatus();
    }
    // A Recv nobody answers ends at the child's 300 ms, not the world's 60 s.
    const absl::Time start = absl::Now();
    int32_t v = 0;
    absl::Status s = (*child)->Recv(&v, 1, DataType::kInt32, 1);
    const absl::Duration took = absl::Now() - start;
    if (s.ok() || took > absl::Seconds(2)) {
      return absl::InternalError(absl::StrCat(
          "recv gave ", s.ToString(), " after ", absl::FormatDuration(took)));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
