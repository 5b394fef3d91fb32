// The statistics //bench:allreduce_2d reports: median, interquartile mean
// and the bootstrap half width of the mesh/raw ratio.
#include "bench/run_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(RunStatsTest, Median) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(Median({7.0}), 7.0);
  EXPECT_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

TEST(RunStatsTest, InterquartileMeanDropsAQuarterOnEachSide) {
  // Sorted: 1 2 | 3 4 5 6 | 7 100: the mean of 3..6.
  EXPECT_EQ(InterquartileMean({100.0, 7.0, 1.0, 2.0, 6.0, 5.0, 4.0, 3.0}), 4.5);
  // 9 values, sorted -40 0.1 | 0.2 2 3 4 5 | 6 50: n/4 = 2 dropped on each
  // side, the mean of the middle five.
  EXPECT_DOUBLE_EQ(InterquartileMean({0.1, 50, 2, 3, 4, 5, 6, -40, 0.2}),
                   14.2 / 5);
  // Fewer than 4: the median.
  EXPECT_EQ(InterquartileMean({5.0, 1.0, 9.0}), 5.0);
  EXPECT_EQ(InterquartileMean({}), 0.0);
}

TEST(RunStatsTest, BootstrapHalfWidth) {
  EXPECT_EQ(BootstrapHalfWidth95({}), 0.0);
  EXPECT_EQ(BootstrapHalfWidth95({1.0}), 0.0);
  // No spread, no width.
  EXPECT_EQ(BootstrapHalfWidth95(std::vector<double>(40, 1.0)), 0.0);
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(1.0 + 0.01 * (i % 7) - 0.03);
  const double w = BootstrapHalfWidth95(v);
  // Fixed seed: the same values give the same width.
  EXPECT_EQ(BootstrapHalfWidth95(v), w);
  EXPECT_GT(w, 0.0);
  EXPECT_LT(w, 0.03);  // less than half the range of the values
  // The same resamples of values 10 times as spread: 10 times the width.
  std::vector<double> wide;
  for (double x : v) wide.push_back(1.0 + 10 * (x - 1.0));
  EXPECT_NEAR(BootstrapHalfWidth95(wide), 10 * w, 1e-12);
  // More values of the same spread: a narrower interval.
  std::vector<double> more;
  for (int k = 0; k < 10; ++k) more.insert(more.end(), v.begin(), v.end());
  EXPECT_LT(BootstrapHalfWidth95(more), w);
}

}  // namespace
}  // namespace devmesh
