// The address Gloo devices advertise by default (device_mesh/peer_address.h),
// with a fake route probe: the two-host runs themselves are in
// tools/launcher_check.sh.
#include "device_mesh/peer_address.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace devmesh {
namespace {

PeerInfo Peer(int rank, std::string host, std::string address) {
  PeerInfo p;
  p.rank = rank;
  p.world_size = 4;
  p.hostname = std::move(host);
  p.address = std::move(address);
  p.store = "h0:29500";
  return p;
}

// Records the hosts probed; answers `answer`.
struct FakeRoute {
  std::vector<std::string>* probed;
  absl::StatusOr<std::string> answer;
  absl::StatusOr<std::string> operator()(absl::string_view host) const {
    probed->emplace_back(host);
    return answer;
  }
};

TEST(IsLoopbackAddressTest, Literals) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.1.1"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("fe80::1"));
  EXPECT_FALSE(IsLoopbackAddress("localhost"));
  EXPECT_FALSE(IsLoopbackAddress(""));
}

TEST(PeerFacingAddressTest, NonLoopbackStoreRouteIsUsedAsIs) {
  std::vector<std::string> probed;
  const std::vector<PeerInfo> peers = {
      Peer(0, "h0", "10.0.0.1"), Peer(1, "h0", "10.0.0.1"),
      Peer(2, "h1", "10.0.0.2"), Peer(3, "h1", "10.0.0.2")};
  EXPECT_EQ(PeerFacingAddress(peers[2], peers, FakeRoute{&probed, "x"}),
            "10.0.0.2");
  EXPECT_TRUE(probed.empty());
}

TEST(PeerFacingAddressTest, LoopbackOnTheStoreHostRoutesTowardARemotePeer) {
  std::vector<std::string> probed;
  // Ranks 0, 1 reach the store (on h0) over loopback; 2, 3 over the network.
  const std::vector<PeerInfo> peers = {
      Peer(0, "h0", "127.0.0.1"), Peer(1, "h0", "127.0.0.1"),
      Peer(2, "h1", "10.0.0.2"), Peer(3, "h1", "10.0.0.2")};
  EXPECT_EQ(PeerFacingAddress(peers[1], peers,
                              FakeRoute{&probed, std::string("10.0.0.1")}),
            "10.0.0.1");
  EXPECT_EQ(probed, (std::vector<std::string>{"10.0.0.2"}));
}

TEST(PeerFacingAddressTest, OneHostKeepsLoopback) {
  std::vector<std::string> probed;
  const std::vector<PeerInfo> peers = {
      Peer(0, "h0", "127.0.0.1"), Peer(1, "h0", "127.0.0.1")};
  EXPECT_EQ(PeerFacingAddress(peers[0], peers, FakeRoute{&probed, "10.9.9.9"}),
            "127.0.0.1");
  EXPECT_TRUE(probed.empty());
}

TEST(PeerFacingAddressTest, FailedOrLoopbackProbeKeepsTheStoreRoute) {
  std::vector<std::string> probed;
  const std::vector<PeerInfo> peers = {
      Peer(0, "h0", "127.0.0.1"), Peer(1, "h1", "192.168.1.7")};
  EXPECT_EQ(PeerFacingAddress(
                peers[0], peers,
                FakeRoute{&probed, absl::UnavailableError("no route")}),
            "127.0.0.1");
  EXPECT_EQ(PeerFacingAddress(peers[0], peers,
                              FakeRoute{&probed, std::string("127.0.0.1")}),
            "127.0.0.1");
  EXPECT_EQ(probed.size(), 2u);
}

TEST(PeerFacingAddressTest, UnknownAddressStaysEmpty) {
  std::vector<std::string> probed;
  const std::vector<PeerInfo> peers = {Peer(0, "h0", ""),
                                       Peer(1, "h1", "10.0.0.2")};
  EXPECT_EQ(PeerFacingAddress(peers[0], peers, FakeRoute{&probed, "10.0.0.1"}),
            "");
  EXPECT_TRUE(probed.empty());
}

TEST(PeerFacingAddressTest, RemotePeersWithLoopbackOrNoAddressAreSkipped) {
  std::vector<std::string> probed;
  const std::vector<PeerInfo> peers = {
      Peer(0, "h0", "127.0.0.1"), Peer(1, "h1", "127.0.0.1"),
      Peer(2, "h2", ""), Peer(3, "h3", "10.0.0.4")};
  EXPECT_EQ(PeerFacingAddress(peers[0], peers,
                              FakeRoute{&probed, std::string("10.0.0.1")}),
            "10.0.0.1");
  EXPECT_EQ(probed, (std::vector<std::string>{"10.0.0.4"}));
}

}  // namespace
}  // namespace devmesh
