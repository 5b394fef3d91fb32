// EtcdStore::CompareSet as the epoch decision (device_mesh/epoch_agreement.h)
// uses it, CompareSet(decision, "", mine), against a real 3-member etcd
// cluster (tests/store/etcd_testing.h):
//   - many deciders, each talking to one member only, race on one key per
//     round: every decider gets the same winner back, it is one of theirs,
//     and every member then serves it;
//   - the member that applied a decider's txn is SIGKILLed before its
//     answer leaves (a relay in front of it drops the reply): the decider
//     sends the txn again elsewhere and gets its own value back, the value
//     that won.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "store/etcd_store.h"
#include "tests/store/etcd_testing.h"

namespace devmesh {
namespace {

using ::devmesh::testing::EtcdCluster;

constexpr char kPrefix[] = "/devmesh-agreement-test/";

absl::StatusOr<std::unique_ptr<EtcdStore>> Open(
    std::vector<std::string> endpoints) {
  EtcdStoreOptions options;
  options.endpoints = std::move(endpoints);
  options.key_prefix = kPrefix;
  options.default_timeout = absl::Seconds(20);
  options.connect_timeout = absl::Seconds(1);
  options.attempt_timeout = absl::Seconds(2);
  return EtcdStore::Connect(options);
}

int PortOf(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

// A TCP relay on 127.0.0.1 in front of one etcd member. Bytes pass both
// ways until the member answers a request whose bytes hold `trigger`: then
// `on_trigger` runs (it kills the member), and the relay closes the
// client's connection without passing the answer on and stops listening, so
// that the client's next attempt is refused and goes to another member.
class DroppingRelay {
 public:
  DroppingRelay(int target_port, std::string trigger,
                std::function<void()> on_trigger)
      : target_port_(target_port),
        trigger_(std::move(trigger)),
        on_trigger_(std::move(on_trigger)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
            0 ||
        listen(listen_fd_, 16) != 0) {
      return;
    }
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~DroppingRelay() {
    stop_.store(true);
    if (acceptor_.joinable()) acceptor_.join();
    for (std::thread& t : relays_) t.join();
    if (listen_fd_ >= 0) close(listen_fd_);
  }
  int port() const { return port_; }
  bool triggered() const { return triggered_.load(); }

 private:
  void Accept() {
    while (!stop_.load() && !triggered_.load()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      relays_.emplace_back([this, client] { Relay(client); });
    }
    // Triggered: refuse from now on (a closed listening socket).
    close(listen_fd_);
    listen_fd_ = -1;
  }

  void Relay(int client) {
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(target_port_);
    if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
        0) {
      close(server);
      close(client);
      return;
    }
    std::string request;  // the client's bytes since the member last spoke
    char buf[65536];
    while (!stop_.load()) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = read(client, buf, sizeof(buf));
        if (n <= 0 || write(server, buf, n) != n) break;
        request.append(buf, n);
      }
      if (p[1].revents != 0) {
        const ssize_t n = read(server, buf, sizeof(buf));
        if (n <= 0) break;
        if (!triggered_.load() && absl::StrContains(request, trigger_)) {
          triggered_.store(true);
          on_trigger_();  // the member dies with its answer unsent
          break;
        }
        request.clear();
        if (write(client, buf, n) != n) break;
      }
    }
    close(server);
    close(client);
  }

  const int target_port_;
  const std::string trigger_;
  const std::function<void()> on_trigger_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> triggered_{false};
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // touched by the acceptor only
};

// 30 deciders, 10 per member (each store knows one member only), race on
// one decision key per round, 10 rounds: all read back one winner, one of
// theirs, and each member serves it afterwards.
TEST(EtcdAgreementTest, DecidersThroughEveryMemberAgreeOnOneWinner) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  constexpr int kDeciders = 30;
  constexpr int kRounds = 10;
  const std::vector<std::string> members = etcd.endpoints();
  std::vector<std::unique_ptr<EtcdStore>> stores;
  for (int d = 0; d < kDeciders; ++d) {
    auto store = Open({members[d % 3]});
    ASSERT_TRUE(store.ok()) << store.status();
    stores.push_back(std::move(*store));
  }
  // results[round][decider]
  std::vector<std::vector<std::string>> results(
      kRounds, std::vector<std::string>(kDeciders));
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<absl::Barrier>> starts;
  for (int r = 0; r < kRounds; ++r) {
    starts.push_back(std::make_unique<absl::Barrier>(kDeciders));
  }
  for (int d = 0; d < kDeciders; ++d) {
    threads.emplace_back([&, d] {
      for (int r = 0; r < kRounds; ++r) {
        starts[r]->Block();  // everyone sends this round's txn together
        auto won = stores[d]->CompareSet(
            absl::StrCat("devmesh/epoch/", r, "/decision"), "",
            absl::StrCat("survivors=decider-", d));
        results[r][d] = won.ok() ? *won : "error: " + won.status().ToString();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRounds; ++r) {
    const std::string& winner = results[r][0];
    for (int d = 0; d < kDeciders; ++d) {
      EXPECT_EQ(results[r][d], winner) << "round " << r << " decider " << d;
    }
    ASSERT_TRUE(absl::StartsWith(winner, "survivors=decider-")) << winner;
    for (int m = 0; m < 3; ++m) {
      auto v = stores[m]->Get(absl::StrCat("devmesh/epoch/", r, "/decision"),
                              absl::Seconds(5));
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(*v, winner) << "member " << m << " round " << r;
    }
  }
}

// The member that applies the decider's txn is SIGKILLed before its answer
// leaves: the decider cannot know whether its txn applied, sends it again
// (to another member) and gets back the value that won, its own; the other
// members hold it.
TEST(EtcdAgreementTest, MemberKilledAfterApplyingBeforeAnswering) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  const std::vector<std::string> members = etcd.endpoints();
  // The txn's JSON holds "compare"; Connect's status probe does not.
  DroppingRelay relay(PortOf(members[0]), "\"compare\"",
                      [&etcd] { etcd.Kill(0); });
  ASSERT_GT(relay.port(), 0);
  auto decider = Open({absl::StrCat("127.0.0.1:", relay.port()), members[1],
                       members[2]});
  ASSERT_TRUE(decider.ok()) << decider.status();
  auto won = (*decider)->CompareSet("devmesh/epoch/0/decision", "",
                                    "survivors=0,1;dead=2");
  EXPECT_TRUE(relay.triggered());
  ASSERT_TRUE(won.ok()) << won.status();
  EXPECT_EQ(*won, "survivors=0,1;dead=2");
  // A later decider, through the members left, finds that decision.
  auto other = Open({members[2], members[1]});
  ASSERT_TRUE(other.ok()) << other.status();
  auto late = (*other)->CompareSet("devmesh/epoch/0/decision", "",
                                   "survivors=0,2;dead=1");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "survivors=0,1;dead=2");
}

}  // namespace
}  // namespace devmesh
