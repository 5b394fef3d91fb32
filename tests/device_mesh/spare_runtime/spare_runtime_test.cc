// devmesh/tests/device_mesh/spare_runtime/spare_runtime_test.cc
// SpareRuntimeFromEnv over a real store server: the spare holds the host
// table the job's rendezvous agreed (so that it chooses each group's
// transport as the members do), or none when the store holds no completed
// rendezvous. The job's ranks are threads with their own store clients,
// claiming host names of their own ("host-a", "host-b").
#include <stdlib.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bootstrap/peer_info.h"
#include "device_mesh/spare_runtime.h"
#include "gtest/gtest.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace devmesh {
namespace {

class SpareRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
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
  // Its own entry is its predecessor's, as every member holds it.
  EXPECT_EQ((*runtime)->hostnames(),
            (std::vector<std::string>{"host-a", "host-b"}));
}

TEST_F(SpareRuntimeTest, NoRendezvousNoTable) {
  auto runtime = SpareRuntimeFromEnv(absl::Seconds(10));
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_TRUE((*runtime)->hostnames().empty());
  EXPECT_TRUE((*runtime)->store_route_address().empty());
}

}  // namespace
}  // namespace devmesh
