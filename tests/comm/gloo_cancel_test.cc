// CommOptions::creation_cancel in the Gloo backend: a creation waiting in
// Gloo's pair connect for a peer that published its address and never
// connects ends with the cancel check's error once it returns one, instead
// of at the timeout (issue 20: such a peer died after publishing).
//
// The peer is faked: its address key holds a Gloo TCP address that compares
// greater than this rank's (127.255.255.254 against 127.0.0.1), so this rank
// is the pair's listening side (Gloo's rule in Pair::connect) and waits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/registry.h"
#include "gloo/transport/tcp/address.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

std::string NeverConnectingPeerAddress() {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_port = htons(65000);
  inet_pton(AF_INET, "127.255.255.254", &in->sin_addr);
  std::vector<char> bytes = ::gloo::transport::tcp::Address(ss, 1).bytes();
  return std::string(bytes.begin(), bytes.end());
}

// Rank 0 of 2 (global ranks 4 and 7), on 127.0.0.1, with rank 1's addresses
// already published for it: its mesh pair's, and its synchronous route
// pair's (a group of 2 offers the route, gloo_sync_allreduce.h, and keeps
// it only across hosts).
CommOptions ListeningRankOptions(absl::Duration timeout) {
  CommOptions options;
  options.timeout = timeout;
  options.global_ranks = {4, 7};
  options.gloo.hostname = "127.0.0.1";
  return options;
}

std::shared_ptr<Store> StoreWithFakePeer() {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(60));
  EXPECT_TRUE(store->Set("gloo/addr/1/0", NeverConnectingPeerAddress()).ok());
  EXPECT_TRUE(
      store->Set("gloo/sync_addr/1/0", NeverConnectingPeerAddress()).ok());
  return store;
}

TEST(GlooCancelTest, CancelEndsTheWaitForAPeerThatNeverConnects) {
  std::shared_ptr<Store> store = StoreWithFakePeer();
  std::atomic<bool> dead{false};
  std::atomic<int> asked_before{0};
  CommOptions options = ListeningRankOptions(absl::Seconds(60));
  options.creation_cancel = [&]() -> absl::Status {
    if (dead.load()) return absl::UnavailableError("rank 7 was found dead");
    asked_before.fetch_add(1);
    return absl::OkStatus();
  };
  absl::Notification started;
  std::thread verdict([&] {
    started.WaitForNotification();
    absl::SleepFor(absl::Milliseconds(500));
    dead.store(true);
  });
  started.Notify();
  const absl::Time start = absl::Now();
  auto comm = CreateCommunicator("gloo", store, 0, 2, options);
  const absl::Duration took = absl::Now() - start;
  verdict.join();
  ASSERT_EQ(comm.status().code(), absl::StatusCode::kUnavailable)
      << comm.status();
  const std::string message(comm.status().message());
  EXPECT_TRUE(absl::StrContains(
      message, "waiting for the connection with global rank 7 (pairs closed)"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, ": rank 7 was found dead")) << message;
  // Asked while the peer was still alive (every 100 ms), ended after the
  // verdict, well before the 60 s timeout.
  EXPECT_GE(asked_before.load(), 2);
  EXPECT_GE(took, absl::Milliseconds(500));
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(GlooCancelTest, TheCancelCheckKeepsItsCode) {
  std::shared_ptr<Store> store = StoreWithFakePeer();
  CommOptions options = ListeningRankOptions(absl::Seconds(60));
  options.creation_cancel = [] {
    return absl::FailedPreconditionError("this rank was fenced");
  };
  auto comm = CreateCommunicator("gloo", store, 0, 2, options);
  ASSERT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition)
      << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(),
                                "this rank was fenced"))
      << comm.status();
}

TEST(GlooCancelTest, WithoutACancelCheckTheTimeoutEndsTheWait) {
  std::shared_ptr<Store> store = StoreWithFakePeer();
  auto comm = CreateCommunicator("gloo", store, 0, 2,
                                 ListeningRankOptions(absl::Seconds(1)));
  ASSERT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded)
      << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(),
                                "connection to global rank 7 not made within"))
      << comm.status();
}

TEST(GlooCancelTest, AnOkCheckNeverEndsAHealthyCreation) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  std::atomic<int> asked{0};
  auto make = [&](int rank) {
    CommOptions options;
    options.timeout = absl::Seconds(30);
    options.gloo.hostname = "127.0.0.1";
    options.creation_cancel = [&] {
      asked.fetch_add(1);
      return absl::OkStatus();
    };
    return CreateCommunicator("gloo", store, rank, 2, options);
  };
  absl::StatusOr<std::unique_ptr<Communicator>> other;
  std::thread peer([&] { other = make(1); });
  auto comm = make(0);
  peer.join();
  ASSERT_TRUE(comm.ok()) << comm.status();
  ASSERT_TRUE(other.ok()) << other.status();
  float in = 2, out = 0;
  float in1 = 3, out1 = 0;
  std::thread t([&] {
    EXPECT_TRUE((*other)->AllReduce(&in1, &out1, 1, DataType::kFloat32,
                                    ReduceOp::kSum).ok());
  });
  EXPECT_TRUE(
      (*comm)->AllReduce(&in, &out, 1, DataType::kFloat32, ReduceOp::kSum).ok());
  t.join();
  EXPECT_EQ(out, 5.0f);
  EXPECT_EQ(out1, 5.0f);
}

}  // namespace
}  // namespace devmesh
