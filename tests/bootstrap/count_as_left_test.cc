// CountAsLeft: each rank is counted once however often and by whomever it
// is reported, rank 0 and ranks outside the world never, and the last
// count of the world's other ranks sets the key rank 0's Leave waits for.
#include <memory>

#include "bootstrap/bootstrap.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

TEST(CountAsLeft, CountsEachRankOnceAndTellsRankZeroWhenAllLeft) {
  InMemoryStore store;
  constexpr int kWorld = 4;
  ASSERT_TRUE(CountAsLeft(store, 2, kWorld).ok());
  ASSERT_TRUE(CountAsLeft(store, 2, kWorld).ok());  // a second survivor
  ASSERT_TRUE(CountAsLeft(store, 0, kWorld).ok());  // never counted
  ASSERT_TRUE(CountAsLeft(store, 4, kWorld).ok());  // outside the world
  ASSERT_TRUE(CountAsLeft(store, -1, kWorld).ok());
  EXPECT_EQ(*store.Add("devmesh/bootstrap/left", 0), 1);
  EXPECT_FALSE(*store.Check({"devmesh/bootstrap/all_left"}));
  ASSERT_TRUE(CountAsLeft(store, 1, kWorld).ok());
  EXPECT_FALSE(*store.Check({"devmesh/bootstrap/all_left"}));
  ASSERT_TRUE(CountAsLeft(store, 3, kWorld).ok());
  EXPECT_EQ(*store.Add("devmesh/bootstrap/left", 0), 3);
  EXPECT_TRUE(*store.Check({"devmesh/bootstrap/all_left"}));
  ASSERT_TRUE(CountAsLeft(store, 3, kWorld).ok());  // its own late Leave
  EXPECT_EQ(*store.Add("devmesh/bootstrap/left", 0), 3);
}

}  // namespace
}  // namespace devmesh
