// EtcdStore (store/etcd_store.h) against a real 3-member etcd cluster on
// 127.0.0.1 (tests/store/etcd_testing.h), one cluster per test: a member
// killed, a member stopped, quorum lost.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

// A member going away, as etcd's gateway answers while its own member shuts
// down: every request gets HTTP 499 with gRPC's CANCELLED ("grpc: the client
// connection is closing"), and nothing is applied; but the status probe of
// EtcdStore::Connect is answered (the member was up when the client came),
// so each new client tries this member first. Listens on 127.0.0.1.
class GoingMember {
 public:
  GoingMember() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~GoingMember() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }
  int requests() const { return requests_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      // Reads the head, then Content-Length bytes of body.
      std::string in;
      char buf[4096];
      size_t need = std::string::npos;
      while (need == std::string::npos || in.size() < need) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        const size_t head = in.find("\r\n\r\n");
        if (need == std::string::npos && head != std::string::npos) {
          size_t body = 0;
          const size_t at = in.find("Content-Length: ");
          if (at != std::string::npos && at < head) {
            const size_t end = in.find("\r\n", at);
            (void)absl::SimpleAtoi(in.substr(at + 16, end - at - 16), &body);
          }
          need = head + 4 + body;
        }
      }
      if (absl::StartsWith(in, "POST /v3/maintenance/status ")) {
        const std::string status = R"({"version":"3.4.23"})";
        const std::string out = absl::StrCat(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Content-Length: ",
            status.size(), "\r\nConnection: close\r\n\r\n", status);
        (void)!write(c, out.data(), out.size());
        close(c);
        continue;
      }
      ++requests_;
      const std::string reply =
          R"({"error":"grpc: the client connection is closing","code":1,)"
          R"("message":"grpc: the client connection is closing"})";
      const std::string out = absl::StrCat(
          "HTTP/1.1 499 Client Closed Request\r\n"
          "Content-Type: application/json\r\nContent-Length: ",
          reply.size(), "\r\nConnection: close\r\n\r\n", reply);
      (void)!write(c, out.data(), out.size());
      close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// The first endpoint is a member going away (GoingMember), the second a
// live one. A Set and a Get go on to the live member; a CompareSet's txn,
// refused by the going member, is Unavailable to it (applied or not, as far
// as the client knows), sent again to the live member, and decides; an Add
// applies once. None returns the gateway's CANCELLED, and each call meets
// the going member once, later calls starting at the live member.
TEST(EtcdClusterTest, MemberGoingAwayIsLeftForTheNext) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  GoingMember going;
  EtcdStoreOptions options;
  options.endpoints = {going.endpoint(), etcd.endpoints()[0]};
  options.key_prefix = "/devmesh-going-test/";
  options.default_timeout = absl::Seconds(10);
  options.connect_timeout = absl::Seconds(1);
  options.attempt_timeout = absl::Seconds(1);
  auto open = [&] { return EtcdStore::Connect(options); };

  auto setter = open();
  ASSERT_TRUE(setter.ok()) << setter.status();
  ASSERT_TRUE((*setter)->Set("k", "v").ok());
  EXPECT_EQ(going.requests(), 1);

  auto reader = open();
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::string> v = (*reader)->Get("k", absl::Seconds(5));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  EXPECT_EQ(going.requests(), 2);

  for (int i = 0; i < 2; ++i) {
    auto decider = open();
    ASSERT_TRUE(decider.ok()) << decider.status();
    const int before = going.requests();
    absl::StatusOr<std::string> won =
        (*decider)->CompareSet("decision", "", i == 0 ? "x" : "y");
    ASSERT_TRUE(won.ok()) << won.status();
    EXPECT_EQ(*won, "x");
    EXPECT_EQ(going.requests(), before + 1);
  }

  auto adder = open();
  ASSERT_TRUE(adder.ok()) << adder.status();
  const int before = going.requests();
  // Its read meets the going member and moves on to the live one, where
  // the txn goes too: applied once.
  absl::StatusOr<int64_t> first = (*adder)->Add("n", 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(going.requests(), before + 1);
  absl::StatusOr<int64_t> second = (*adder)->Add("n", 1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, 2);
  EXPECT_EQ(going.requests(), before + 1);
}

}  // namespace
}  // namespace devmesh
