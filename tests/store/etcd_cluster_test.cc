// EtcdStore (store/etcd_store.h) against a real 3-member etcd cluster on
// 127.0.0.1 (tests/store/etcd_testing.h), one cluster per test: a member
// killed, a member stopped, quorum lost.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/etcd_store.h"
#include "tests/store/etcd_testing.h"

namespace devmesh {
namespace {

using ::devmesh::testing::EtcdCluster;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<EtcdStore>> Open(
    const EtcdCluster& etcd, absl::Duration timeout = absl::Seconds(10)) {
  EtcdStoreOptions options;
  options.endpoints = etcd.endpoints();
  options.key_prefix = "/devmesh-cluster-test/";
  options.default_timeout = timeout;
  options.connect_timeout = absl::Seconds(1);
  options.attempt_timeout = absl::Seconds(1);
  return EtcdStore::Connect(options);
}

// Member 0, the first endpoint every call tries, is SIGKILLed between Adds:
// the count stays exact and no call fails.
TEST(EtcdClusterTest, KilledMemberIsFailedOver) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  auto store = Open(etcd);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*store)->Add("n", 1).ok());
  etcd.Kill(0);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<int64_t> n = (*store)->Add("n", 1);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 21 + i);
  }
  absl::StatusOr<std::string> v = (*store)->Get("n", absl::Seconds(5));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "40");
}

// Member 0 is SIGSTOPped (it accepts connections but never answers): every
// call moves on to another member after attempt_timeout (1 s), well inside
// its deadline, and the Adds stay exact; continued, it serves again.
TEST(EtcdClusterTest, StoppedMemberIsSkipped) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  auto store = Open(etcd);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("k", "v").ok());
  etcd.Stop(0);
  const absl::Time start = absl::Now();
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<int64_t> n = (*store)->Add("n", 1);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, i + 1);
  }
  absl::StatusOr<std::string> v = (*store)->Get("k", absl::Seconds(5));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  // One attempt_timeout to leave member 0; then the member that answered.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  etcd.Continue(0);
  EtcdStoreOptions only0;
  only0.endpoints = {etcd.endpoints()[0]};
  only0.key_prefix = "/devmesh-cluster-test/";
  only0.default_timeout = absl::Seconds(10);
  auto direct = EtcdStore::Connect(only0);
  ASSERT_TRUE(direct.ok()) << direct.status();
  absl::StatusOr<std::string> n = (*direct)->Get("n", absl::Seconds(5));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, "10");
}

// A Get waits (a watch) through member 0, which is then SIGSTOPped: it keeps
// the stream open and sends nothing. A Set through member 1 must still
// release the Get within a watch slice (5 s) and an attempt timeout (1 s),
// not when member 0 continues (after the Get's 20 s).
TEST(EtcdClusterTest, StoppedMemberUnderAWaitingGet) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  auto waiter = Open(etcd, absl::Seconds(30));
  ASSERT_TRUE(waiter.ok()) << waiter.status();
  EtcdStoreOptions others;
  others.endpoints = {etcd.endpoints()[1], etcd.endpoints()[2]};
  others.key_prefix = "/devmesh-cluster-test/";
  others.default_timeout = absl::Seconds(10);
  auto setter = EtcdStore::Connect(others);
  ASSERT_TRUE(setter.ok()) << setter.status();
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(300));
    etcd.Stop(0);
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_TRUE((*setter)->Set("w", "x").ok());
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = (*waiter)->Get("w", absl::Seconds(20));
  const absl::Duration took = absl::Now() - start;
  stopper.join();
  etcd.Continue(0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "x");
  EXPECT_LT(took, absl::Seconds(9));
}

// Two of three members die: the one left has no leader. A Set and an Add
// end Unavailable at their deadline (4 s), naming lost quorum; a waiting Get
// ends by its timeout.
TEST(EtcdClusterTest, LostQuorumIsUnavailableByTheDeadline) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  auto store = Open(etcd, absl::Seconds(4));
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("k", "v").ok());
  etcd.Kill(1);
  etcd.Kill(2);
  const std::string survivor = etcd.endpoints()[0];
  for (const char* op : {"Set", "Add"}) {
    const absl::Time start = absl::Now();
    const absl::Status s = std::string(op) == "Set"
                               ? (*store)->Set("k", "w")
                               : (*store)->Add("n", 1).status();
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << op << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("has no leader (it has lost quorum"))
        << op;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("member ", survivor,
                                       " reports 'etcdserver: no leader'")))
        << op;
    EXPECT_LT(took, absl::Seconds(5)) << op;  // the deadline, and a probe
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> missing =
      (*store)->Get("never-set", absl::Seconds(2));
  EXPECT_FALSE(missing.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << missing.status();
}

}  // namespace
}  // namespace devmesh
