// devmesh/tests/device_mesh/epoch_agreement_test.cc
// AgreeOnSurvivors (device_mesh/epoch_agreement.h) on one process: ranks 0
// and 1 of a world of 3 agree, each on its own thread with its own watch
// over one in-memory store, after a verdict that names rank 2. Both get the
// same survivors, dead set and payloads, byte for byte, even for payloads
// that hold the decision's own separators; the decision in the store fences
// rank 2 and no one else; an epoch without a verdict is refused.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "device_mesh/epoch_agreement.h"
#include "device_mesh/failure_watch.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

constexpr absl::Duration kPeriod = absl::Milliseconds(50);

TEST(EpochAgreementTest, SurvivorsGetTheSameDecisionAndPayloads) {
  auto store = std::make_shared<InMemoryStore>();
  ASSERT_TRUE(store
                  ->Set(FailureWatch::EpochKey(0, "death"),
                        EncodeVerdict({2, "global rank 2 is gone (test)"}))
                  .ok());
  const std::vector<std::string> payload = {
      "a=1/1;b=2/0;",
      std::string("x:3:\nsurvivors=9;dead=\0;", 23),
  };
  std::vector<std::optional<absl::StatusOr<Agreement>>> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto watch = FailureWatch::Start(store, r, /*world_size=*/3, kPeriod,
                                       4 * kPeriod);
      got[r] = AgreeOnSurvivors(*watch, /*epoch=*/0, {0, 1, 2}, payload[r],
                                /*lease=*/10 * kPeriod, absl::Seconds(10));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(got[r].has_value());
    ASSERT_TRUE(got[r]->ok()) << got[r]->status();
    const Agreement& a = **got[r];
    EXPECT_EQ(a.survivors, (std::vector<int>{0, 1}));
    EXPECT_EQ(a.dead, (std::vector<int>{2}));
    ASSERT_EQ(a.payloads.size(), 2u);
    EXPECT_EQ(a.payloads.at(0), payload[0]);
    EXPECT_EQ(a.payloads.at(1), payload[1]);
  }
  auto decision = store->Get(FailureWatch::EpochKey(0, "decision"),
                             absl::Seconds(1));
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_TRUE(IsSurvivor(*decision, 0));
  EXPECT_TRUE(IsSurvivor(*decision, 1));
  EXPECT_FALSE(IsSurvivor(*decision, 2));
  // The epoch's one decision: a later call gets it again.
  auto watch = FailureWatch::Start(store, 0, 3, kPeriod, 4 * kPeriod);
  auto again = AgreeOnSurvivors(*watch, 0, {0, 1, 2}, "other", 10 * kPeriod,
                                absl::Seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->payloads.at(0), payload[0]);
}

TEST(EpochAgreementTest, NoVerdictNoAgreement) {
  auto store = std::make_shared<InMemoryStore>();
  auto watch = FailureWatch::Start(store, 0, 2, kPeriod, 4 * kPeriod);
  auto a = AgreeOnSurvivors(*watch, 0, {0, 1}, "p", 10 * kPeriod,
                            absl::Seconds(10));
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status())) << a.status();
  EXPECT_FALSE(store->Check({FailureWatch::EpochKey(0, "decision")}).value());
}

TEST(EpochAgreementTest, DecisionsThatCannotBeParsedFenceNobody) {
  EXPECT_TRUE(IsSurvivor("error=4;too slow", 3));
  EXPECT_TRUE(IsSurvivor("survivors=0,1;dead=2\n0:5:ab", 2));  // short payload
  EXPECT_TRUE(IsSurvivor("garbage", 2));
  EXPECT_FALSE(IsSurvivor("survivors=0,1;dead=2\n0:2:ab\n1:0:", 2));
}

}  // namespace
}  // namespace device_mesh_internal
}  // namespace devmesh
