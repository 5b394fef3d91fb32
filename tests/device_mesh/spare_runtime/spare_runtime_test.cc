// devmesh/tests/device_mesh/spare_runtime/spare_runtime_test.cc
// SpareRuntimeFromEnv over a real store server: the spare holds the host
// table the job's rendezvous agreed, its own entry the host it runs on (a
// Grow carries that entry to every member, so that all choose each group's
// transport alike), or none when the store holds no completed rendezvous. The job's ranks are threads with their own store clients,
// claiming host names of their own ("host-a", "host-b").
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bootstrap/peer_info.h"
#include "device_mesh/spare_runtime.h"
#include "gtest/gtest.h"
#include "tests/store/etcd_testing.h"
#include "store/etcd_store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace devmesh {
namespace {

class SpareRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // absl's random pool (store clients' retry jitter) made once here, not
    // first by two rank threads at once: Debian's absl is not built with
    // TSan, which then reports its one-time set-up as a race.
    absl::BitGen warm;
    (void)absl::Uniform<int>(warm, 0, 2);
    auto server = TcpStoreServer::Start(TcpStoreServerOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
    // Rank 1 of 2, started again as a spare by hand.
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("LOCAL_WORLD_SIZE", "1", 1);
    setenv("DEVMESH_STORE_ADDR", address_.c_str(), 1);
    setenv(kSpareVar, "1", 1);
  }

  // The job's rendezvous: rank r on hosts[r], each through its own client.
  void Rendezvous(const std::vector<std::string>& hosts) {
    std::vector<std::thread> ranks;
    for (size_t r = 0; r < hosts.size(); ++r) {
      ranks.emplace_back([&, r] {
        TcpStoreClientOptions options;
        options.port = server_->port();
        auto client = TcpStoreClient::Connect(options);
        ASSERT_TRUE(client.ok()) << client.status();
        PeerInfo self;
        self.rank = static_cast<int>(r);
        self.world_size = static_cast<int>(hosts.size());
        self.pid = 1000 + static_cast<int64_t>(r);
        self.hostname = hosts[r];
        self.address = absl::StrCat("10.0.0.", r + 1);
        self.store = address_;
        EXPECT_TRUE(
            ExchangePeerInfo(**client, self, absl::Seconds(30)).ok());
      });
    }
    for (std::thread& t : ranks) t.join();
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::string address_;
};

TEST_F(SpareRuntimeTest, HoldsTheJobsHostTable) {
  Rendezvous({"host-a", "host-b"});
  ASSERT_TRUE(StartedAsSpare());
  auto runtime = SpareRuntimeFromEnv(absl::Seconds(10));
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ((*runtime)->rank(), 1);
  EXPECT_EQ((*runtime)->world_size(), 2);
  // Its own entry is the host it runs on (a Grow carries it to every
  // member), not its predecessor's "host-b".
  EXPECT_EQ((*runtime)->hostnames(),
            (std::vector<std::string>{"host-a", LocalHostName()}));
}

TEST_F(SpareRuntimeTest, NoRendezvousNoTable) {
  auto runtime = SpareRuntimeFromEnv(absl::Seconds(10));
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_TRUE((*runtime)->hostnames().empty());
  EXPECT_TRUE((*runtime)->store_route_address().empty());
}

// The job's store is an etcd cluster (DEVMESH_STORE_ADDR "etcd://..."): the
// spare joins it under the job's key prefix and holds the job's host table,
// as over a TCP store.
TEST_F(SpareRuntimeTest, JoinsAnEtcdStore) {
  ::devmesh::testing::EtcdCluster etcd;
  absl::Status started = etcd.Start(1);
  ASSERT_TRUE(started.ok()) << started;
  const std::string prefix =
      absl::StrCat("/devmesh-test/spare_runtime/", getpid(), "/");
  const std::string address = etcd.Address(prefix);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      EtcdStoreOptions options;
      options.endpoints = etcd.endpoints();
      options.key_prefix = prefix;
      auto client = EtcdStore::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      PeerInfo self;
      self.rank = r;
      self.world_size = 2;
      self.pid = 1000 + r;
      self.hostname = r == 0 ? "host-a" : "host-b";
      self.address = absl::StrCat("10.0.0.", r + 1);
      self.store = address;
      EXPECT_TRUE(ExchangePeerInfo(**client, self, absl::Seconds(30)).ok());
    });
  }
  for (std::thread& t : ranks) t.join();
  setenv("DEVMESH_STORE_ADDR", address.c_str(), 1);
  auto runtime = SpareRuntimeFromEnv(absl::Seconds(10));
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ((*runtime)->rank(), 1);
  EXPECT_EQ((*runtime)->hostnames(),
            (std::vector<std::string>{"host-a", LocalHostName()}));
  // Its store is the job's: what a member sets there, it reads.
  std::shared_ptr<Store> store = (*runtime)->base_store();
  ASSERT_NE(dynamic_cast<EtcdStore*>(store.get()), nullptr);
  EtcdStoreOptions options;
  options.endpoints = etcd.endpoints();
  options.key_prefix = prefix;
  auto member = EtcdStore::Connect(options);
  ASSERT_TRUE(member.ok()) << member.status();
  ASSERT_TRUE((*member)->Set("from-a-member", "1").ok());
  EXPECT_EQ(*store->Get("from-a-member", absl::Seconds(5)), "1");
}

TEST_F(SpareRuntimeTest, RankZeroHostedStoreIsRefused) {
  unsetenv("DEVMESH_STORE_ADDR");
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", absl::StrCat(server_->port()).c_str(), 1);
  auto runtime = SpareRuntimeFromEnv(absl::Seconds(10));
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kFailedPrecondition)
      << runtime.status();
}

}  // namespace
}  // namespace devmesh
