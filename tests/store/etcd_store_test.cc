// Tests of EtcdStore (store/etcd_store.h) against a real etcd: the suite
// starts /usr/bin/etcd (a single member on free 127.0.0.1 ports, a temporary
// data dir) and stops it at the end. Without /usr/bin/etcd every test fails:
// CI installs it (tools/install.sh).
#include "store/etcd_store.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/store/etcd_testing.h"

namespace devmesh {
namespace {

using ::testing::HasSubstr;

// One member of tests/store/etcd_testing.h's cluster.
using EtcdProcess = ::devmesh::testing::EtcdCluster;

int FreePort() { return ::devmesh::testing::FreeLoopbackPort(); }

// The first (only) member's "127.0.0.1:port".
std::string Endpoint(const EtcdProcess& etcd) { return etcd.endpoints()[0]; }

class EtcdStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    etcd_ = new EtcdProcess();
    *start_ = etcd_->Start(1);
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(start_->ok()) << *start_;
    absl::StatusOr<std::unique_ptr<EtcdStore>> store = Open(Prefix());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // A prefix of this test's own, so tests never see each other's keys.
  static std::string Prefix() {
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    return absl::StrCat("/devmesh-test/", info->name(), "/", getpid(), "/");
  }

  static absl::StatusOr<std::unique_ptr<EtcdStore>> Open(
      const std::string& prefix,
      std::vector<std::string> endpoints = {Endpoint(*etcd_)}) {
    EtcdStoreOptions options;
    options.endpoints = std::move(endpoints);
    options.key_prefix = prefix;
    options.default_timeout = absl::Seconds(10);
    options.connect_timeout = absl::Seconds(2);
    return EtcdStore::Connect(options);
  }

  static EtcdProcess* etcd_;
  static absl::Status* start_;
  std::unique_ptr<EtcdStore> store_;
};

EtcdProcess* EtcdStoreTest::etcd_ = nullptr;
absl::Status* EtcdStoreTest::start_ = new absl::Status();

TEST_F(EtcdStoreTest, SetGet) {
  ASSERT_TRUE(store_->Set("a", "1").ok());
  EXPECT_EQ(*store_->Get("a"), "1");
  ASSERT_TRUE(store_->Set("a", "2").ok());
  EXPECT_EQ(*store_->Get("a"), "2");
  const std::string binary("\0\xff\n x", 5);
  ASSERT_TRUE(store_->Set(binary, binary).ok());
  EXPECT_EQ(*store_->Get(binary), binary);
  ASSERT_TRUE(store_->Set("empty", "").ok());
  EXPECT_EQ(*store_->Get("empty", absl::Seconds(1)), "");
}

TEST_F(EtcdStoreTest, EmptyKeyIsInvalid) {
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Set("", "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Get("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Add("", 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->DeleteKey("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Check({"a", ""}).status()));
}

TEST_F(EtcdStoreTest, GetOfMissingKeyTimesOutNamingIt) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got =
      store_->Get("never-set", absl::Milliseconds(500));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("'never-set'"));
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST_F(EtcdStoreTest, GetIsReleasedBySetFromAnotherThread) {
  std::thread setter([this] {
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(store_->Set("later", "v").ok());
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = store_->Get("later", absl::Seconds(20));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(EtcdStoreTest, ConcurrentAddsAreAtomic) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (!store_->Add("counter", 1).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(*store_->Add("counter", 0), 200);
  EXPECT_EQ(*store_->Get("counter"), "200");
  EXPECT_EQ(*store_->Add("fresh", -5), -5);
}

TEST_F(EtcdStoreTest, AddRejectsNonNumbersAndOverflow) {
  ASSERT_TRUE(store_->Set("text", "abc").ok());
  absl::StatusOr<int64_t> sum = store_->Add("text", 1);
  EXPECT_TRUE(absl::IsInvalidArgument(sum.status())) << sum.status();
  ASSERT_TRUE(
      store_->Set("max", absl::StrCat(std::numeric_limits<int64_t>::max()))
          .ok());
  sum = store_->Add("max", 1);
  EXPECT_TRUE(absl::IsInvalidArgument(sum.status())) << sum.status();
  EXPECT_THAT(sum.status().message(), HasSubstr("overflow"));
}

TEST_F(EtcdStoreTest, CompareSetFollowsC10dRule) {
  // Missing, expected empty: set.
  EXPECT_EQ(*store_->CompareSet("k1", "", "d"), "d");
  EXPECT_EQ(*store_->Get("k1"), "d");
  // Missing, expected not empty: `expected` back, nothing set.
  EXPECT_EQ(*store_->CompareSet("k2", "x", "d"), "x");
  EXPECT_FALSE(*store_->Check({"k2"}));
  // Holds expected: set.
  EXPECT_EQ(*store_->CompareSet("k1", "d", "e"), "e");
  EXPECT_EQ(*store_->Get("k1"), "e");
  // Holds something else: the current value back, unchanged.
  EXPECT_EQ(*store_->CompareSet("k1", "zzz", "f"), "e");
  EXPECT_EQ(*store_->Get("k1"), "e");
  // Holds "" and expected is "": it holds expected, so set.
  ASSERT_TRUE(store_->Set("k3", "").ok());
  EXPECT_EQ(*store_->CompareSet("k3", "", "g"), "g");
  // Holds "v" and expected is "": not missing, so "v" back.
  ASSERT_TRUE(store_->Set("k4", "v").ok());
  EXPECT_EQ(*store_->CompareSet("k4", "", "h"), "v");
  EXPECT_EQ(*store_->Get("k4"), "v");
}

TEST_F(EtcdStoreTest, WaitForKeysSetLater) {
  const std::vector<std::string> keys = {"w1", "w2", "w3"};
  std::thread setter([&] {
    for (const std::string& k : keys) {
      absl::SleepFor(absl::Milliseconds(100));
      ASSERT_TRUE(store_->Set(k, "x").ok());
    }
  });
  absl::Status waited = store_->Wait(keys, absl::Seconds(20));
  setter.join();
  EXPECT_TRUE(waited.ok()) << waited;
  EXPECT_TRUE(store_->Wait(keys, absl::ZeroDuration()).ok());
}

TEST_F(EtcdStoreTest, WaitTimesOutNamingFirstMissingKey) {
  ASSERT_TRUE(store_->Set("here", "x").ok());
  const std::vector<std::string> keys = {"here", "gone1", "gone2"};
  absl::Status waited = store_->Wait(keys, absl::Milliseconds(300));
  ASSERT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("'gone1'"));
}

TEST_F(EtcdStoreTest, Check) {
  EXPECT_TRUE(*store_->Check({}));
  EXPECT_FALSE(*store_->Check({"c1", "c2"}));
  ASSERT_TRUE(store_->Set("c1", "x").ok());
  EXPECT_FALSE(*store_->Check({"c1", "c2"}));
  ASSERT_TRUE(store_->Set("c2", "").ok());
  EXPECT_TRUE(*store_->Check({"c1", "c2"}));
}

TEST_F(EtcdStoreTest, DeleteKey) {
  ASSERT_TRUE(store_->Set("d", "x").ok());
  EXPECT_TRUE(*store_->DeleteKey("d"));
  EXPECT_FALSE(*store_->DeleteKey("d"));
  EXPECT_FALSE(*store_->Check({"d"}));
}

TEST_F(EtcdStoreTest, NumKeysCountsOnlyItsPrefix) {
  absl::StatusOr<std::unique_ptr<EtcdStore>> a = Open(Prefix() + "a/");
  absl::StatusOr<std::unique_ptr<EtcdStore>> b = Open(Prefix() + "b/");
  ASSERT_TRUE(a.ok() && b.ok());
  for (const char* k : {"x", "y", "z"}) ASSERT_TRUE((*a)->Set(k, "1").ok());
  for (const char* k : {"x", "y"}) ASSERT_TRUE((*b)->Set(k, "1").ok());
  EXPECT_EQ(*(*a)->NumKeys(), 3);
  EXPECT_EQ(*(*b)->NumKeys(), 2);
  EXPECT_EQ(*store_->NumKeys(), 5);  // both sit under this test's prefix
  ASSERT_TRUE(*(*a)->DeleteKey("x"));
  EXPECT_EQ(*(*a)->NumKeys(), 2);
}

TEST_F(EtcdStoreTest, MultiSetMultiGet) {
  const std::vector<std::string> keys = {"m1", "m2", "m3"};
  const std::vector<std::string> values = {"v1", "", "v3"};
  ASSERT_TRUE(store_->MultiSet(keys, values).ok());
  absl::StatusOr<std::vector<std::string>> got =
      store_->MultiGet(keys, absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, values);
  // A repeated key: the last value wins, as with Sets in order.
  ASSERT_TRUE(store_->MultiSet({"r", "r"}, {"first", "second"}).ok());
  EXPECT_EQ(*store_->Get("r"), "second");
  // More keys than one etcd txn takes.
  std::vector<std::string> many_keys, many_values;
  for (int i = 0; i < 300; ++i) {
    many_keys.push_back(absl::StrCat("many/", i));
    many_values.push_back(absl::StrCat(i * 7));
  }
  ASSERT_TRUE(store_->MultiSet(many_keys, many_values).ok());
  got = store_->MultiGet(many_keys, absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, many_values);
  EXPECT_TRUE(*store_->Check(many_keys));
}

TEST_F(EtcdStoreTest, MultiGetWaitsForMissingKeys) {
  ASSERT_TRUE(store_->Set("g1", "a").ok());
  std::thread setter([this] {
    absl::SleepFor(absl::Milliseconds(200));
    ASSERT_TRUE(store_->Set("g2", "b").ok());
  });
  absl::StatusOr<std::vector<std::string>> got =
      store_->MultiGet({"g1", "g2"}, absl::Seconds(20));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<std::string>{"a", "b"}));
  got = store_->MultiGet({"g1", "g3"}, absl::Milliseconds(200));
  ASSERT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("'g3'"));
}

TEST_F(EtcdStoreTest, MultiSetWithMismatchedSpansIsInvalid) {
  absl::Status set = store_->MultiSet({"a", "b"}, {"1"});
  EXPECT_TRUE(absl::IsInvalidArgument(set)) << set;
  EXPECT_FALSE(*store_->Check({"a"}));
}

TEST_F(EtcdStoreTest, ValueOverEtcdLimitIsInvalidNamingTheLimit) {
  for (size_t bytes : {size_t{2} << 20, size_t{1600} * 1000}) {
    absl::Status set = store_->Set("big", std::string(bytes, 'x'));
    ASSERT_TRUE(absl::IsInvalidArgument(set)) << bytes << ": " << set;
    EXPECT_THAT(set.message(), HasSubstr("1.5 MiB"));
  }
  // Just under the limit works.
  ASSERT_TRUE(store_->Set("big", std::string(1400 * 1000, 'y')).ok());
  EXPECT_EQ(store_->Get("big")->size(), 1400u * 1000u);
}

TEST_F(EtcdStoreTest, ConnectChecksOptions) {
  EXPECT_TRUE(absl::IsInvalidArgument(Open("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Open("/p/", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Open("/p/", {"localhost"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Open("/p/", {"h:0"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Open("/p/", {"h:70000"}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(Open("/p/", {"https://h:2379"}).status()));
  EXPECT_TRUE(Open("/p/", {"http://" + Endpoint(*etcd_) + "/"}).ok());
}

TEST_F(EtcdStoreTest, ConnectToDeadPortIsUnavailableNamingIt) {
  const std::string dead = absl::StrCat("127.0.0.1:", FreePort());
  absl::StatusOr<std::unique_ptr<EtcdStore>> store = Open("/p/", {dead});
  ASSERT_TRUE(absl::IsUnavailable(store.status())) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(dead));
}

TEST_F(EtcdStoreTest, FailsOverFromDeadEndpoint) {
  const std::string dead = absl::StrCat("127.0.0.1:", FreePort());
  absl::StatusOr<std::unique_ptr<EtcdStore>> store =
      Open(Prefix(), {dead, Endpoint(*etcd_)});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("f", "over").ok());
  EXPECT_EQ(*(*store)->Get("f"), "over");
  EXPECT_EQ(*(*store)->Add("n", 2), 2);
  // Another store that starts at the dead endpoint for every call.
  EXPECT_EQ(*store_->Get("f"), "over");
}

TEST_F(EtcdStoreTest, WaitingGetEndsWhenEtcdStops) {
  auto own = std::make_unique<EtcdProcess>();
  ASSERT_TRUE(own->Start(1).ok());
  absl::StatusOr<std::unique_ptr<EtcdStore>> store =
      Open(Prefix(), {Endpoint(*own)});
  ASSERT_TRUE(store.ok()) << store.status();
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(300));
    own.reset();  // SIGTERM, reaped
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = (*store)->Get("k", absl::Seconds(30));
  stopper.join();
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace devmesh
