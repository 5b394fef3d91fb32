// CancellableStore (store/cancellable_store.h) over an in-memory
// store: a waiting call ends with the cancel check's error once it says so,
// within a slice; keeps waiting, and answers, while it does not; ends with
// the base store's DeadlineExceeded at the caller's own timeout; and the
// calls that do not wait are forwarded untouched.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/cancellable_store.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

constexpr absl::Duration kSlice = absl::Milliseconds(50);

struct Fixture {
  std::shared_ptr<InMemoryStore> base = std::make_shared<InMemoryStore>();
  std::atomic<bool> stop{false};
  std::atomic<int> checks{0};
  CancellableStore store{base, kSlice, [this]() -> absl::Status {
                           checks.fetch_add(1);
                           return stop.load() ? absl::UnavailableError("stop")
                                              : absl::OkStatus();
                         }};
};

TEST(CancellableStoreTest, AWaitEndsWithTheCancelErrorWithinASlice) {
  Fixture f;
  std::thread later([&] {
    while (f.checks.load() < 3) absl::SleepFor(absl::Milliseconds(1));
    f.stop.store(true);
  });
  const absl::Time start = absl::Now();
  const absl::Status s = f.store.Wait({"never"}, absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  later.join();
  EXPECT_EQ(s, absl::UnavailableError("stop"));
  // Two slices waited before the stop, at most one after it: not the 60 s.
  EXPECT_GE(took, 2 * kSlice);
  EXPECT_LT(took, absl::Seconds(2));
}

TEST(CancellableStoreTest, GetAndMultiGetAreCancelledToo) {
  Fixture f;
  f.stop.store(true);
  EXPECT_EQ(f.store.Get("never", absl::Seconds(60)).status(),
            absl::UnavailableError("stop"));
  EXPECT_EQ(f.store.MultiGet({"never"}, absl::Seconds(60)).status(),
            absl::UnavailableError("stop"));
  // Asked before waiting at all: once per call.
  EXPECT_EQ(f.checks.load(), 2);
}

TEST(CancellableStoreTest, KeepsWaitingAcrossSlicesAndAnswers) {
  Fixture f;
  std::thread later([&] {
    // Three checks: the first, and two after unanswered slices.
    while (f.checks.load() < 3) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_TRUE(f.base->Set("k", "v").ok());
    ASSERT_TRUE(f.base->Set("j", "w").ok());
  });
  absl::StatusOr<std::string> got = f.store.Get("k", absl::Seconds(60));
  later.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  EXPECT_TRUE(f.store.Wait({"k", "j"}, absl::Seconds(1)).ok());
  absl::StatusOr<std::vector<std::string>> both =
      f.store.MultiGet({"j", "k"}, absl::Seconds(1));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*both, (std::vector<std::string>{"w", "v"}));
}

// A base store error other than DeadlineExceeded ends the call as it is.
TEST(CancellableStoreTest, OtherErrorsPassThrough) {
  Fixture f;
  // An over-long key: the base store's InvalidArgument, at once.
  const std::string key(1 << 20, 'k');
  const absl::Status s = f.store.Wait({key}, absl::Seconds(60));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s, f.base->Wait({key}, absl::Seconds(60)));
}

TEST(CancellableStoreTest, TheCallersTimeoutEndsItWithTheBaseStoresError) {
  Fixture f;
  const absl::Time start = absl::Now();
  const absl::Status s = f.store.Wait({"never"}, absl::Milliseconds(180));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  // The base store's own message, naming the key, with the whole timeout.
  EXPECT_NE(s.message().find("never"), absl::string_view::npos) << s;
  EXPECT_TRUE(absl::EndsWith(
      s.message(), " (the call's timeout: 180ms, waited in slices of 50ms)"))
      << s;
  EXPECT_GE(took, absl::Milliseconds(180));
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(CancellableStoreTest, CallsThatDoNotWaitAreForwardedAndNeverCancelled) {
  Fixture f;
  f.stop.store(true);
  EXPECT_TRUE(f.store.Set("a", "1").ok());
  EXPECT_EQ(*f.store.Add("n", 5), 5);
  EXPECT_EQ(*f.store.CompareSet("a", "1", "2"), "2");
  EXPECT_EQ(*f.store.Check({"a", "n"}), true);
  EXPECT_TRUE(f.store.MultiSet({"b", "c"}, {"x", "y"}).ok());
  EXPECT_EQ(*f.store.DeleteKey("b"), true);
  EXPECT_EQ(*f.base->Get("c", absl::Seconds(1)), "y");
  EXPECT_EQ(*f.base->Get("a", absl::Seconds(1)), "2");
  EXPECT_EQ(f.checks.load(), 0);
}

}  // namespace
}  // namespace devmesh
