// CountAsLeft: each rank's own key, set however often and by whomever it is
// reported; rank 0 and ranks outside the world never; no counter (no key
// that every rank writes).
#include <memory>

#include "bootstrap/bootstrap.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

TEST(CountAsLeft, MarksEachRankOnceAndNothingElse) {
  InMemoryStore store;
  constexpr int kWorld = 4;
  ASSERT_TRUE(CountAsLeft(store, 2, kWorld).ok());
  ASSERT_TRUE(CountAsLeft(store, 2, kWorld).ok());  // a second survivor
  ASSERT_TRUE(CountAsLeft(store, 0, kWorld).ok());  // never counted
  ASSERT_TRUE(CountAsLeft(store, 4, kWorld).ok());  // outside the world
  ASSERT_TRUE(CountAsLeft(store, -1, kWorld).ok());
  EXPECT_EQ(*store.NumKeys(), 1);
  EXPECT_TRUE(*store.Check({"devmesh/bootstrap/gone/2"}));
  ASSERT_TRUE(CountAsLeft(store, 1, kWorld).ok());
  ASSERT_TRUE(CountAsLeft(store, 3, kWorld).ok());
  ASSERT_TRUE(CountAsLeft(store, 3, kWorld).ok());  // its own late Leave
  EXPECT_EQ(*store.NumKeys(), 3);
  // What rank 0's Leave waits for.
  EXPECT_TRUE(store
                  .Wait({"devmesh/bootstrap/gone/1", "devmesh/bootstrap/gone/2",
                         "devmesh/bootstrap/gone/3"},
                        absl::Seconds(1))
                  .ok());
}

}  // namespace
}  // namespace devmesh
