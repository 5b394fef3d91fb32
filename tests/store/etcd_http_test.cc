// EtcdHttp under a member that is slow to answer (SIGSTOPped for a while,
// as a member too loaded to answer within attempt_timeout looks): one
// endpoint's request is not sent again, each attempt with no answer doubles
// the next one's window, and a watch that gets no answer by its deadline is
// DeadlineExceeded, not Unavailable.
#include "store/etcd_http.h"

#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/store/etcd_testing.h"

namespace devmesh {
namespace {

using ::devmesh::testing::EtcdCluster;

nlohmann::json RangeOf(const std::string& key) {
  nlohmann::json read = nlohmann::json::object();
  read["key"] = absl::Base64Escape(key);
  return read;
}

// The one member stops for 3.5 s under a read: the read waits for it (there
// is nowhere else to go) and is sent once, where it used to be sent again
// every attempt_timeout (1 s), each copy still served by the member.
TEST(EtcdHttpTest, ReadToTheOneSlowMemberIsSentOnce) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  EtcdHttp http(etcd.endpoints(), absl::Seconds(2), absl::Seconds(1));
  etcd.Stop(0);
  std::thread waker([&] {
    absl::SleepFor(absl::Milliseconds(3500));
    etcd.Continue(0);
  });
  absl::StatusOr<nlohmann::json> range =
      http.Post("/v3/kv/range", RangeOf("/http-test/k"),
                absl::Now() + absl::Seconds(10), EtcdHttp::Retry::kIdempotent);
  waker.join();
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(http.requests(), 1);
}

// A conditional txn (Retry::kIfNotSent, a CompareSet's) to the one member,
// stopped for 3.5 s: it waits for the member and is sent once, where it was
// given up after attempt_timeout (1 s), Unavailable, and sent again by its
// caller to the same member (the copies all served, each after a status
// probe: 1361 probes in one 1024-rank round of tools/scale_check.sh).
TEST(EtcdHttpTest, ConditionalTxnToTheOneSlowMemberIsSentOnce) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  EtcdHttp http(etcd.endpoints(), absl::Seconds(2), absl::Seconds(1));
  etcd.Stop(0);
  std::thread waker([&] {
    absl::SleepFor(absl::Milliseconds(3500));
    etcd.Continue(0);
  });
  const nlohmann::json txn = {
      {"compare",
       nlohmann::json::array({{{"key", absl::Base64Escape("/http-test/cs")},
                               {"target", "VERSION"},
                               {"result", "EQUAL"},
                               {"version", "0"}}})},
      {"success",
       nlohmann::json::array(
           {{{"request_put",
              {{"key", absl::Base64Escape("/http-test/cs")},
               {"value", absl::Base64Escape("1")}}}}})}};
  absl::StatusOr<nlohmann::json> sent =
      http.Post("/v3/kv/txn", txn, absl::Now() + absl::Seconds(10),
                EtcdHttp::Retry::kIfNotSent);
  waker.join();
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_TRUE((*sent)["succeeded"].get<bool>());
  EXPECT_EQ(http.requests(), 1);
}

// A watch on the one stopped member: DeadlineExceeded at its deadline (the
// waiting call reads again), one request; before, Unavailable could follow
// rounds of 1 s attempts.
TEST(EtcdHttpTest, UnansweredWatchIsDeadlineExceeded) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  EtcdHttp http(etcd.endpoints(), absl::Seconds(2), absl::Seconds(1));
  etcd.Stop(0);
  const nlohmann::json watch = {
      {"create_request", {{"key", absl::Base64Escape("/http-test/w")}}}};
  const absl::Time start = absl::Now();
  absl::Status streamed =
      http.Stream("/v3/watch", watch, start + absl::Milliseconds(2500),
                  [](const nlohmann::json&) -> absl::StatusOr<bool> {
                    return true;
                  });
  const absl::Duration took = absl::Now() - start;
  etcd.Continue(0);
  EXPECT_TRUE(absl::IsDeadlineExceeded(streamed)) << streamed;
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_EQ(http.requests(), 1);
}

// Three members, all stopped: a read tries each with windows of 1 s, 2 s
// and 4 s (doubled after each attempt with no answer), then the first again
// until the deadline: 4 requests in 9 s, where windows of 1 s made 6.
TEST(EtcdHttpTest, WindowDoublesAfterEachUnansweredAttempt) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(3).ok());
  EtcdHttp http(etcd.endpoints(), absl::Seconds(2), absl::Seconds(1));
  for (int i = 0; i < 3; ++i) etcd.Stop(i);
  const absl::Time start = absl::Now();
  absl::StatusOr<nlohmann::json> range =
      http.Post("/v3/kv/range", RangeOf("/http-test/k"),
                start + absl::Seconds(9), EtcdHttp::Retry::kIdempotent);
  const absl::Duration took = absl::Now() - start;
  for (int i = 0; i < 3; ++i) etcd.Continue(i);
  EXPECT_FALSE(range.ok());
  EXPECT_EQ(http.requests(), 4) << range.status();
  EXPECT_LT(took, absl::Seconds(11));
}

// A request sent once (Retry::kOnce, an Add's txn) to a member that has lost
// quorum (the other two of three killed, the survivor reporting no leader):
// Unavailable naming the lost quorum and that the txn may or may not have
// been applied, before its deadline; it used to wait out the deadline and
// end DeadlineExceeded, saying nothing of the cluster. Three clusters, the
// outcome of each asserted; one request each (the status probes are not
// counted: they are not the request).
TEST(EtcdHttpTest, OnceRequestToAMemberWithoutQuorumIsUnavailableNamingIt) {
  constexpr int kTrials = 3;
  int unavailable = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    EtcdCluster etcd;
    const absl::Status started = etcd.Start(3);
    ASSERT_TRUE(started.ok()) << started;
    const std::string survivor = etcd.endpoints()[0];
    EtcdHttp http({survivor}, absl::Seconds(2), absl::Seconds(1));
    etcd.Kill(1);
    etcd.Kill(2);
    // Until the survivor knows it has no leader (an election timeout).
    bool leaderless = false;
    for (int i = 0; i < 100 && !leaderless; ++i) {
      absl::StatusOr<nlohmann::json> status =
          http.Post("/v3/maintenance/status", nlohmann::json::object(),
                    absl::Now() + absl::Seconds(2),
                    EtcdHttp::Retry::kIdempotent);
      leaderless = status.ok() && status->contains("errors") &&
                   !(*status)["errors"].empty();
      if (!leaderless) absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_TRUE(leaderless) << "trial " << trial;
    const int64_t before = http.requests();
    const nlohmann::json txn = {
        {"success",
         nlohmann::json::array(
             {{{"request_put",
                {{"key", absl::Base64Escape("/http-test/once")},
                 {"value", absl::Base64Escape("1")}}}}})}};
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    absl::StatusOr<nlohmann::json> sent =
        http.Post("/v3/kv/txn", txn, deadline, EtcdHttp::Retry::kOnce);
    EXPECT_EQ(sent.status().code(), absl::StatusCode::kUnavailable)
        << "trial " << trial << ": " << sent.status();
    EXPECT_THAT(std::string(sent.status().message()),
                ::testing::AllOf(
                    ::testing::HasSubstr("has no leader (it has lost quorum"),
                    ::testing::HasSubstr(absl::StrCat(
                        "member ", survivor,
                        " reports 'etcdserver: no leader'")),
                    ::testing::HasSubstr("may or may not have been applied")))
        << "trial " << trial;
    EXPECT_LT(absl::Now(), deadline) << "trial " << trial;
    EXPECT_EQ(http.requests() - before, 1) << "trial " << trial;
    if (absl::IsUnavailable(sent.status())) ++unavailable;
  }
  std::printf("kOnce txn to a member without quorum: %d of %d Unavailable "
              "naming it\n",
              unavailable, kTrials);
}

}  // namespace
}  // namespace devmesh
