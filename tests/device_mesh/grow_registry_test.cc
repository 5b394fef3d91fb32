// devmesh/tests/device_mesh/grow_registry_test.cc
// The store protocol of spares and Grow (device_mesh/spare_registry.h) over
// an in-memory store: decisions round-trip exactly, text that is not a
// decision is an Internal error (never a crash), the job's position follows
// Shrink and Grow decisions, and registered spares are read once each.
#include "device_mesh/spare_registry.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/error_info.h"
#include "device_mesh/failure_watch.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

TEST(GrowDecision, GrownRoundTrips) {
  GrowDecision d;
  d.kind = GrowDecision::Kind::kGrown;
  d.admitted = {2, 3};
  d.waiting = {7};
  d.root_index = 4;
  d.replica_dim = 1;
  d.mesh = std::string("bytes\n:with\0binary", 18);
  d.asks = {{0, "12:mesh dim 'dp'x=1/1;"}, {5, ""}};
  const std::string text = EncodeGrowDecision(d);
  EXPECT_EQ(text.substr(0, 51),
            "grown;admitted=2,3;waiting=7;root=4;dim=1\n18:bytes\n");
  absl::StatusOr<GrowDecision> back = DecodeGrowDecision(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, GrowDecision::Kind::kGrown);
  EXPECT_EQ(back->admitted, d.admitted);
  EXPECT_EQ(back->waiting, d.waiting);
  EXPECT_EQ(back->root_index, 4);
  EXPECT_EQ(back->replica_dim, 1);
  EXPECT_EQ(back->mesh, d.mesh);
  EXPECT_EQ(back->asks, d.asks);
}

TEST(GrowDecision, UnchangedAndErrorRoundTrip) {
  GrowDecision u;
  u.kind = GrowDecision::Kind::kUnchanged;
  u.waiting = {2};
  EXPECT_EQ(EncodeGrowDecision(u), "unchanged;waiting=2");
  auto back = DecodeGrowDecision("unchanged;waiting=2");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, GrowDecision::Kind::kUnchanged);
  EXPECT_EQ(back->waiting, std::vector<int>{2});

  GrowDecision e;
  e.kind = GrowDecision::Kind::kError;
  e.error = WithDisagreement(absl::InvalidArgumentError("a; b"), 3);
  EXPECT_EQ(EncodeGrowDecision(e), "error=3;3;a; b");
  auto err = DecodeGrowDecision("error=3;3;a; b");
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->error, WithDisagreement(absl::InvalidArgumentError("a; b"), 3));
  auto plain = DecodeGrowDecision("error=4;-1;late");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->error, absl::DeadlineExceededError("late"));
  EXPECT_EQ(GetErrorInfo(plain->error).disagreeing, -1);
}

TEST(GrowDecision, TextThatIsNotADecisionIsInternal) {
  for (const std::string& bad :
       {std::string(""), std::string("grown;"), std::string("unchanged;"),
        std::string("unchanged;waiting=x"), std::string("error=0;-1;x"),
        std::string("error=99;-1;x"), std::string("error=3;x;y"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n99:short"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n1:x\n5:3:ab"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n1:x\nz:1:a"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0;extra=1\n1:x"),
        std::string("\xff\xfe")}) {
    auto d = DecodeGrowDecision(bad);
    EXPECT_TRUE(absl::IsInternal(d.status())) << "'" << bad << "': "
                                              << d.status();
  }
}

TEST(JobPosition, FollowsShrinkAndGrowDecisions) {
  InMemoryStore store;
  auto at = FindJobPosition(store);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, (JobPosition{0, 0}));
  // Epoch 0: a Grow that admitted no one, then a Shrink.
  ASSERT_TRUE(store.Set(GrowKey(0, 0, "decision"), "unchanged;waiting=").ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{0, 1}));
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(0, "decision"),
                        "survivors=0,1;dead=2")
                  .ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{1, 0}));
  // Epoch 1: an error, then a Grow that admitted.
  ASSERT_TRUE(store.Set(GrowKey(1, 0, "decision"), "error=3;1;no").ok());
  ASSERT_TRUE(store.Set(GrowKey(1, 1, "decision"),
                        "grown;admitted=2;waiting=;root=0;dim=0\n0:")
                  .ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{2, 0}));
  // A failed Shrink decision does not move the job.
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(2, "decision"),
                        "error=4;late")
                  .ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{2, 0}));
}

TEST(RegisteredSpares, EachRankOnceSortedSkippingBadSlots) {
  InMemoryStore store;
  ASSERT_TRUE(RegisterSpare(store, 1, 3).ok());
  ASSERT_TRUE(RegisterSpare(store, 1, 2).ok());
  ASSERT_TRUE(RegisterSpare(store, 1, 3).ok());  // restarted, registered again
  ASSERT_TRUE(store.Add(SpareCountKey(1), 1).ok());  // counted, not written
  ASSERT_TRUE(store.Add(SpareCountKey(1), 1).ok());
  ASSERT_TRUE(store.Set(SpareSlotKey(1, 4), "not a rank").ok());
  auto spares = RegisteredSpares(store, 1);
  ASSERT_TRUE(spares.ok()) << spares.status();
  EXPECT_EQ(*spares, (std::vector<int>{2, 3}));
  auto none = RegisteredSpares(store, 2);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace device_mesh_internal
}  // namespace devmesh
