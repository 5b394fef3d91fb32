// EtcdStore's leases (store/etcd_store.h) against one real etcd member
// (tests/store/etcd_testing.h): a granted lease keeps its key while kept
// alive, etcd deletes the key when the lease expires (seen by
// AwaitPresence's watch) or is revoked, and an expired lease is NotFound.
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "store/etcd_store.h"
#include "tests/store/etcd_testing.h"

namespace devmesh {
namespace {

using ::devmesh::testing::EtcdCluster;

absl::StatusOr<std::unique_ptr<EtcdStore>> Open(const EtcdCluster& etcd) {
  EtcdStoreOptions options;
  options.endpoints = etcd.endpoints();
  options.key_prefix = "/devmesh-lease-test/";
  options.default_timeout = absl::Seconds(20);
  return EtcdStore::Connect(options);
}

TEST(EtcdLeaseTest, KeyLivesWhileKeptAliveAndGoesAtExpiry) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  auto store = Open(etcd);
  ASSERT_TRUE(store.ok()) << store.status();
  // 1 s is below etcd's minimum TTL (3/2 election timeout, rounded up: 2 s).
  auto lease = (*store)->GrantLease(absl::Milliseconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ttl, absl::Seconds(2));
  ASSERT_TRUE((*store)->SetWithLease("lease/0", "alive", lease->id).ok());
  // Kept alive every 500 ms for 3 s (longer than the TTL): the key stays.
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE((*store)->KeepAlive(lease->id).ok());
    auto still = (*store)->AwaitPresence("lease/0", true, absl::Milliseconds(500));
    ASSERT_TRUE(still.ok()) << still.status();
    EXPECT_TRUE(*still) << i;
  }
  // Left alone: etcd deletes it once the TTL runs out; the watch sees it.
  auto gone = (*store)->AwaitPresence("lease/0", true, absl::Seconds(15));
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_FALSE(*gone);
  auto check = (*store)->Check({"lease/0"});
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(*check);
  EXPECT_EQ((*store)->KeepAlive(lease->id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->SetWithLease("lease/0", "again", lease->id).code(),
            absl::StatusCode::kNotFound);
}

// A keepalive to a member that does not answer (SIGSTOPped) ends at the
// deadline it is given (the lease's expiry, from the liveness's keeper),
// DeadlineExceeded, not at the store's round trip (here 20 s; minutes by
// default); the lease, kept by nobody meanwhile, is then NotFound.
TEST(EtcdLeaseTest, KeepAliveEndsAtItsDeadline) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  auto store = Open(etcd);
  ASSERT_TRUE(store.ok()) << store.status();
  auto lease = (*store)->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  etcd.Stop(0);
  const absl::Time start = absl::Now();
  absl::Status kept =
      (*store)->KeepAlive(lease->id, start + absl::Milliseconds(1500));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(kept.code(), absl::StatusCode::kDeadlineExceeded) << kept;
  EXPECT_LT(took, absl::Seconds(4));
  absl::SleepFor(absl::Seconds(1));
  etcd.Continue(0);
  // Expired by etcd's clock once it runs again (at most a TTL later).
  absl::Status after = absl::OkStatus();
  for (int i = 0; i < 40 && after.ok(); ++i) {
    after = (*store)->KeepAlive(lease->id);
    if (after.ok()) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(after.code(), absl::StatusCode::kNotFound) << after;
}

TEST(EtcdLeaseTest, RevokeDeletesTheKeyAndIsIdempotent) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  auto store = Open(etcd);
  ASSERT_TRUE(store.ok()) << store.status();
  auto lease = (*store)->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ttl, absl::Seconds(30));
  ASSERT_TRUE((*store)->SetWithLease("lease/1", "x", lease->id).ok());
  ASSERT_TRUE((*store)->Set("left/1", "1").ok());
  ASSERT_TRUE((*store)->RevokeLease(lease->id).ok());
  auto check = (*store)->Check({"lease/1"});
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(*check);
  auto left = (*store)->Get("left/1", absl::Seconds(1));  // not on the lease
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, "1");
  EXPECT_TRUE((*store)->RevokeLease(lease->id).ok());
  EXPECT_EQ((*store)->GrantLease(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EtcdLeaseTest, AwaitPresenceOfAMissingKey) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  auto store = Open(etcd);
  ASSERT_TRUE(store.ok()) << store.status();
  auto absent = (*store)->AwaitPresence("k", false, absl::Milliseconds(300));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(*absent);  // the timeout: still missing
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_TRUE((*store)->Set("k", "v").ok());
  });
  auto set = (*store)->AwaitPresence("k", false, absl::Seconds(15));
  setter.join();
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(*set);
}

}  // namespace
}  // namespace devmesh
