#include "store/memory_store.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "store/prefix_store.h"
#include "store/store_limits.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(InMemoryStoreTest, SetGetAddCompareSetDelete) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  EXPECT_EQ(*store.Get("a", absl::Seconds(1)), "1");
  EXPECT_EQ(*store.Add("a", 41), 42);
  EXPECT_EQ(*store.Get("a"), "42");
  EXPECT_EQ(*store.Add("counter", -3), -3);
  EXPECT_EQ(*store.CompareSet("cs", "", "x"), "x");
  EXPECT_EQ(*store.CompareSet("cs", "y", "z"), "x");
  EXPECT_EQ(*store.CompareSet("cs", "x", "z"), "z");
  EXPECT_EQ(*store.CompareSet("missing", "e", "d"), "e");
  EXPECT_FALSE(*store.Check({"missing"}));
  EXPECT_EQ(*store.NumKeys(), 3);
  EXPECT_TRUE(*store.DeleteKey("cs"));
  EXPECT_FALSE(*store.DeleteKey("cs"));
  EXPECT_EQ(*store.NumKeys(), 2);
  EXPECT_TRUE(*store.Check({"a", "counter"}));
  EXPECT_EQ(*store.GetIfSet("a"), std::optional<std::string>("42"));
  EXPECT_EQ(*store.GetIfSet("missing"), std::nullopt);
}

TEST(InMemoryStoreTest, AddOnNonNumberAndOverflowAreInvalidArgument) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("text", "abc").ok());
  EXPECT_EQ(store.Add("text", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set("big", "9223372036854775807").ok());
  EXPECT_EQ(store.Add("big", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store.Get("big"), "9223372036854775807");
}

TEST(InMemoryStoreTest, LimitsAreInvalidArgument) {
  InMemoryStore store;
  EXPECT_EQ(store.Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set(std::string(kMaxKeyBytes + 1, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set("k", std::string(kMaxValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.MultiSet({"a", "b"}, {"1"}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(InMemoryStoreTest, GetOnMissingKeyIsDeadlineExceeded) {
  InMemoryStore store;
  auto got = store.Get("nope", absl::Milliseconds(50));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("nope"), std::string::npos);
  EXPECT_EQ(store.Wait({"x", "y"}, absl::ZeroDuration()).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(InMemoryStoreTest, WaitWakesWhenAnotherThreadSets) {
  InMemoryStore store;
  std::thread setter([&] {
    ASSERT_TRUE(store.Set("k1", "v1").ok());
    ASSERT_TRUE(store.MultiSet({"k2", "k3"}, {"v2", "v3"}).ok());
  });
  auto values = store.MultiGet({"k1", "k2", "k3"}, absl::Seconds(30));
  setter.join();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"v1", "v2", "v3"}));
}

TEST(InMemoryStoreTest, ThreadsAddExactSum) {
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(store.Add("n", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*store.Get("n"), "8000");
}

TEST(PrefixStoreTest, KeysArePrefixedAndNest) {
  auto base = std::make_shared<InMemoryStore>();
  auto outer = std::make_shared<PrefixStore>(base, "a");
  PrefixStore inner(outer, "b");
  ASSERT_TRUE(inner.Set("k", "v").ok());
  EXPECT_EQ(*base->Get("a/b/k"), "v");
  EXPECT_EQ(*outer->Get("b/k"), "v");
  EXPECT_EQ(*inner.Add("n", 2), 2);
  EXPECT_EQ(*base->Get("a/b/n"), "2");
  ASSERT_TRUE(inner.MultiSet({"x", "y"}, {"1", "2"}).ok());
  EXPECT_EQ(*base->MultiGet({"a/b/x", "a/b/y"}, absl::Seconds(1)),
            (std::vector<std::string>{"1", "2"}));
  EXPECT_TRUE(*inner.Check({"x", "y"}));
  EXPECT_FALSE(*base->Check({"x"}));
  EXPECT_EQ(*inner.NumKeys(), 4);
  EXPECT_EQ(*inner.CompareSet("x", "1", "3"), "3");
  EXPECT_TRUE(*inner.DeleteKey("x"));
  EXPECT_FALSE(*base->Check({"a/b/x"}));
  auto missing = inner.Get("gone", absl::Milliseconds(10));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("a/b/gone"), std::string::npos);
}

TEST(PrefixStoreTest, DeletePrefixStaysInsideTheNamespace) {
  auto base = std::make_shared<InMemoryStore>();
  PrefixStore ns(base, "a");
  ASSERT_TRUE(base->MultiSet({"a/g/1", "a/g/2", "a/h", "g/1"}, {"", "", "", ""})
                  .ok());
  EXPECT_EQ(*ns.DeletePrefix("g/"), 2);
  EXPECT_TRUE(*base->Check({"a/h", "g/1"}));
  EXPECT_EQ(*base->NumKeys(), 2);
  EXPECT_EQ(base->DeletePrefix("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace devmesh
