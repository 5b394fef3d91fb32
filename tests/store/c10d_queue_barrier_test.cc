// Part of //tests/store:c10d_store_test: c10d's QUEUE_PUSH / QUEUE_POP /
// QUEUE_LEN and BARRIER on devmesh's store server, MULTI_GET of a missing
// key, requests pipelined behind a parked WAIT, and replies pipelined
// behind one too large for the socket's buffer (written in part, the rest
// queued), byte for byte on raw sockets. The expected bytes are
// those torch 2.15.0's libuv server sends for the same requests (captured
// through a proxy between torch's client and server); the real torch client
// runs against this server in tests/interop. Misbehaving clients of the new
// query types (half requests, oversized fields, unknown types, a second
// WAIT while one is parked) are dropped with a logged reason, the others
// keep working.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/c10d_wire_format.h"
#include "store/socket.h"
#include "store/store_limits.h"
#include "store/tcp_store_server.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

class C10dQueueBarrierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpStoreServerOptions options;
    options.log = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.emplace_back(line);
    };
    auto server = TcpStoreServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  // A raw c10d connection that has sent its VALIDATE.
  Socket Raw() {
    auto s = Socket::Connect("127.0.0.1", server_->port(), Deadline());
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return Socket();
    EXPECT_TRUE(s->SendAll(Encode({C10dQuery::kValidate, {}, {}, kC10dMagic}),
                           Deadline())
                    .ok());
    return std::move(*s);
  }
  static std::string Encode(const C10dRequest& r) {
    return EncodeC10dRequest(r);
  }
  static absl::Time Deadline() { return absl::Now() + absl::Seconds(10); }
  static void Send(Socket& s, const std::string& bytes) {
    absl::Status st = s.SendAll(bytes, Deadline());
    EXPECT_TRUE(st.ok()) << st;
  }
  // Receives exactly `n` bytes.
  static std::string Recv(Socket& s, size_t n) {
    std::string got(n, '\0');
    absl::Status st = s.RecvAll(got.data(), n, Deadline());
    EXPECT_TRUE(st.ok()) << st;
    return got;
  }
  // Returns once the server has handled everything sent on `s` so far: a
  // PING, answered even behind a parked request.
  static void Sync(Socket& s) {
    Send(s, Encode({C10dQuery::kPing, {}, {}, 0x5EED}));
    std::string nonce;
    AppendC10dU32(nonce, 0x5EED);
    EXPECT_EQ(Recv(s, 4), nonce);
  }
  // True when nothing arrives on `s` within `wait`.
  static bool Silent(Socket& s, absl::Duration wait) {
    char b;
    return s.RecvAll(&b, 1, absl::Now() + wait).code() ==
           absl::StatusCode::kDeadlineExceeded;
  }
  // True when the server closes `s` (after any bytes it still sends).
  static bool ServerCloses(Socket& s) {
    char b;
    while (true) {
      absl::Status st = s.RecvAll(&b, 1, Deadline());
      if (!st.ok()) return st.code() == absl::StatusCode::kUnavailable;
    }
  }
  static std::string U8(uint8_t v) {
    std::string out;
    AppendC10dU8(out, v);
    return out;
  }
  static std::string I64(int64_t v) {
    std::string out;
    AppendC10dI64(out, v);
    return out;
  }
  static std::string Str(absl::string_view v) {
    std::string out;
    AppendC10dString(out, v);
    return out;
  }
  // The one log line that ends with `reason`, for the client on `s`.
  void ExpectLogged(const Socket& s, absl::string_view reason) {
    const int port = *s.LocalPort();
    std::lock_guard<std::mutex> lock(mu_);
    int found = 0;
    for (const std::string& line : log_) {
      if (absl::StartsWith(line,
                           "devmesh store server: dropped the c10d client at ") &&
          absl::StrContains(line, absl::StrCat(":", port, ": ")) &&
          absl::EndsWith(line, reason)) {
        ++found;
      }
    }
    EXPECT_EQ(found, 1) << reason;
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mu_;
  std::vector<std::string> log_;
};

TEST_F(C10dQueueBarrierTest, PipelinedWaitThenSetCompletes) {
  Socket s = Raw();
  // WAIT, then the SET that completes it, before the WAIT's reply; then a
  // GET of the key and an ADD woken the same way.
  std::string req = Encode({C10dQuery::kWait, {"/k"}, {}, 0});
  req += Encode({C10dQuery::kSet, {"/k"}, {"v"}, 0});
  req += Encode({C10dQuery::kGet, {"/k"}, {}, 0});
  req += Encode({C10dQuery::kWait, {"/n"}, {}, 0});
  req += Encode({C10dQuery::kAdd, {"/n"}, {}, 5});
  Send(s, req);
  // The woken WAIT's byte comes before the ADD's reply, as on torch's server.
  const std::string want = U8(kC10dStopWaiting) + Str("v") +
                           U8(kC10dStopWaiting) + I64(5);
  EXPECT_EQ(Recv(s, want.size()), want);
  // Requests behind a parked WAIT are answered while it waits.
  Send(s, Encode({C10dQuery::kWait, {"/later"}, {}, 0}) +
              Encode({C10dQuery::kPing, {}, {}, 77}) +
              Encode({C10dQuery::kGet, {"/k"}, {}, 0}) +
              Encode({C10dQuery::kCheck, {"/later"}, {}, 0}));
  std::string nonce;
  AppendC10dU32(nonce, 77);
  const std::string now = nonce + Str("v") + U8(kC10dNotReady);
  EXPECT_EQ(Recv(s, now.size()), now);
  EXPECT_TRUE(Silent(s, absl::Milliseconds(100)));
  Socket writer = Raw();
  Send(writer, Encode({C10dQuery::kSet, {"/later"}, {"x"}, 0}));
  EXPECT_EQ(Recv(s, 1), U8(kC10dStopWaiting));
}

// A reply larger than the socket's buffer is written in part at once and the
// rest later (the server writes what fits, then queues the remainder); the
// replies pipelined after it must come after all of it, byte for byte.
TEST_F(C10dQueueBarrierTest, RepliesPipelinedBehindAPartlyWrittenOneKeepOrder) {
  Socket s = Raw();
  std::string big(kMaxValueBytes - 64, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  Send(s, Encode({C10dQuery::kSet, {"/big"}, {big}, 0}) +
              Encode({C10dQuery::kSet, {"/small"}, {"s"}, 0}));
  Sync(s);
  // Two GETs of the big value, then small replies, all before reading any.
  Send(s, Encode({C10dQuery::kGet, {"/big"}, {}, 0}) +
              Encode({C10dQuery::kGet, {"/small"}, {}, 0}) +
              Encode({C10dQuery::kGet, {"/big"}, {}, 0}) +
              Encode({C10dQuery::kPing, {}, {}, 99}) +
              Encode({C10dQuery::kCheck, {"/small"}, {}, 0}));
  // Let the server fill the socket's buffer and queue the rest.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(Recv(s, 8 + big.size()), Str(big));
  EXPECT_EQ(Recv(s, 8 + 1), Str("s"));
  EXPECT_EQ(Recv(s, 8 + big.size()), Str(big));
  std::string nonce;
  AppendC10dU32(nonce, 99);
  EXPECT_EQ(Recv(s, 4 + 1), nonce + U8(kC10dReady));
  EXPECT_TRUE(Silent(s, absl::Milliseconds(100)));
}

// MULTI_GET answers "" for a missing key, as torch's libuv server does
// (torch's client WAITs first; a raw client, or a key deleted in between,
// meets it).
TEST_F(C10dQueueBarrierTest, MultiGetOfAMissingKeyIsEmpty) {
  Socket s = Raw();
  Send(s, Encode({C10dQuery::kSet, {"/a"}, {"1"}, 0}) +
              Encode({C10dQuery::kMultiGet, {"/a", "/missing", "/a"}, {}, 0}) +
              Encode({C10dQuery::kMultiGet, {}, {}, 0}) +  // no values
              Encode({C10dQuery::kGetNumKeys, {}, {}, 0}));
  const std::string want = Str("1") + Str("") + Str("1") + I64(1);
  EXPECT_EQ(Recv(s, want.size()), want);
}

TEST_F(C10dQueueBarrierTest, QueueOpsByteForByte) {
  Socket s = Raw();
  std::string req = Encode({C10dQuery::kQueuePush, {"/q"}, {"hello"}, 0});
  req += Encode({C10dQuery::kQueuePush, {"/q"}, {"w2"}, 0});
  req += Encode({C10dQuery::kQueueLen, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kCheck, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kWait, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kQueuePop, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kQueuePop, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kQueuePop, {"/q"}, {}, 0});  // empty now
  req += Encode({C10dQuery::kCheck, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kQueueLen, {"/q"}, {}, 0});
  req += Encode({C10dQuery::kQueueLen, {"/never"}, {}, 0});
  req += Encode({C10dQuery::kGet, {"/q"}, {}, 0});  // queues are no keys
  req += Encode({C10dQuery::kGetNumKeys, {}, {}, 0});
  Send(s, req);
  const std::string want = I64(2) + U8(kC10dReady) + U8(kC10dStopWaiting) +
                           I64(2) + Str("hello") + I64(1) + Str("w2") +
                           I64(0) + U8(kC10dNotReady) + I64(0) + I64(0) +
                           Str("") + I64(0);
  EXPECT_EQ(Recv(s, want.size()), want);
  // torch 2.15's server, same requests (hex of its replies to the pops):
  EXPECT_EQ(I64(2) + Str("hello"),
            std::string("\x02\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0hello", 21));
}

TEST_F(C10dQueueBarrierTest, BlockingPopIsWokenByAPushOneWaiterPerPush) {
  // A blocking queue_pop is WAIT on the queue's key, then QUEUE_POP.
  Socket a = Raw(), b = Raw(), pusher = Raw();
  Send(a, Encode({C10dQuery::kWait, {"/jobs"}, {}, 0}));
  Sync(a);  // a parks first, then b
  Send(b, Encode({C10dQuery::kWait, {"/jobs"}, {}, 0}));
  Sync(b);
  EXPECT_TRUE(Silent(a, absl::Milliseconds(100)));
  Send(pusher, Encode({C10dQuery::kQueuePush, {"/jobs"}, {"j1"}, 0}));
  // One push wakes one waiter (the first parked), not both.
  EXPECT_EQ(Recv(a, 1), U8(kC10dStopWaiting));
  EXPECT_TRUE(Silent(b, absl::Milliseconds(200)));
  Send(a, Encode({C10dQuery::kQueuePop, {"/jobs"}, {}, 0}));
  EXPECT_EQ(Recv(a, 8 + 8 + 2), I64(1) + Str("j1"));
  Send(pusher, Encode({C10dQuery::kQueuePush, {"/jobs"}, {"j2"}, 0}));
  EXPECT_EQ(Recv(b, 1), U8(kC10dStopWaiting));
  Send(b, Encode({C10dQuery::kQueuePop, {"/jobs"}, {}, 0}));
  EXPECT_EQ(Recv(b, 8 + 8 + 2), I64(1) + Str("j2"));
  // A WAIT on several keys completes when the last of them is pushed.
  Send(a, Encode({C10dQuery::kWait, {"/x", "/y"}, {}, 0}));
  Sync(a);
  Send(pusher, Encode({C10dQuery::kQueuePush, {"/x"}, {"1"}, 0}));
  Sync(pusher);
  EXPECT_TRUE(Silent(a, absl::Milliseconds(100)));
  Send(pusher, Encode({C10dQuery::kSet, {"/y"}, {"2"}, 0}));
  EXPECT_EQ(Recv(a, 1), U8(kC10dStopWaiting));
}

TEST_F(C10dQueueBarrierTest, PopCancelledByItsTimeoutThenASetLands) {
  Socket s = Raw();
  // torch's client after its timeout: CANCEL_WAIT, one byte back.
  Send(s, Encode({C10dQuery::kWait, {"/empty"}, {}, 0}));
  Sync(s);
  EXPECT_TRUE(Silent(s, absl::Milliseconds(100)));
  Send(s, Encode({C10dQuery::kCancelWait, {}, {}, 0}) +
              Encode({C10dQuery::kSet, {"/after"}, {"1"}, 0}));
  EXPECT_EQ(Recv(s, 1), U8(kC10dWaitCanceled));
  Socket other = Raw();  // as torch's get(): WAIT, then GET
  Send(other, Encode({C10dQuery::kWait, {"/after"}, {}, 0}) +
                  Encode({C10dQuery::kGet, {"/after"}, {}, 0}));
  EXPECT_EQ(Recv(other, 1 + 9), U8(kC10dStopWaiting) + Str("1"));
  // A push after the cancel wakes nobody on `s` and stays in the queue.
  Send(other, Encode({C10dQuery::kQueuePush, {"/empty"}, {"v"}, 0}) +
                  Encode({C10dQuery::kQueueLen, {"/empty"}, {}, 0}));
  EXPECT_EQ(Recv(other, 8), I64(1));
  EXPECT_TRUE(Silent(s, absl::Milliseconds(100)));
}

TEST_F(C10dQueueBarrierTest, BarrierOfEightReleasesAllAtTheEighth) {
  std::vector<Socket> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(Raw());
  for (int i = 0; i < 7; ++i) {
    Send(clients[i], Encode({C10dQuery::kBarrier, {"/b"}, {}, 8}));
    Sync(clients[i]);  // its call is counted
  }
  for (int i = 0; i < 7; ++i) {
    EXPECT_TRUE(Silent(clients[i], absl::Milliseconds(i == 0 ? 100 : 1)))
        << i;
  }
  Send(clients[7], Encode({C10dQuery::kBarrier, {"/b"}, {}, 8}));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Recv(clients[i], 1), U8(kC10dStopWaiting)) << i;
  }
  // The counter is the key's decimal value, as on torch's server; a later
  // call on a key already at the world size returns at once.
  Send(clients[0], Encode({C10dQuery::kGet, {"/b"}, {}, 0}) +
                       Encode({C10dQuery::kBarrier, {"/b"}, {}, 8}) +
                       Encode({C10dQuery::kGet, {"/b"}, {}, 0}) +
                       Encode({C10dQuery::kGetNumKeys, {}, {}, 0}));
  const std::string want =
      Str("8") + U8(kC10dStopWaiting) + Str("9") + I64(1);
  EXPECT_EQ(Recv(clients[0], want.size()), want);
}

TEST_F(C10dQueueBarrierTest, BarrierCancelKeepsTheCountAndWritesRelease) {
  Socket a = Raw(), b = Raw();
  Send(a, Encode({C10dQuery::kBarrier, {"/b2"}, {}, 2}));
  Sync(a);
  EXPECT_TRUE(Silent(a, absl::Milliseconds(100)));
  Send(a, Encode({C10dQuery::kCancelWait, {}, {}, 0}) +
              Encode({C10dQuery::kGet, {"/b2"}, {}, 0}));
  // torch's server does not take the cancelled call back: the count stays.
  EXPECT_EQ(Recv(a, 1 + 9), U8(kC10dWaitCanceled) + Str("1"));
  Send(b, Encode({C10dQuery::kBarrier, {"/b2"}, {}, 2}));
  EXPECT_EQ(Recv(b, 1), U8(kC10dStopWaiting));
  // Any write of a barrier's key releases it, as on torch's server.
  Send(a, Encode({C10dQuery::kBarrier, {"/w"}, {}, 3}));
  Sync(a);
  EXPECT_TRUE(Silent(a, absl::Milliseconds(100)));
  Send(b, Encode({C10dQuery::kSet, {"/w"}, {"0"}, 0}));
  EXPECT_EQ(Recv(a, 1), U8(kC10dStopWaiting));
  // A WAIT on the key sees the counter as soon as a barrier makes it.
  Send(a, Encode({C10dQuery::kWait, {"/c"}, {}, 0}));
  Sync(a);  // parked before the counter exists
  Send(b, Encode({C10dQuery::kBarrier, {"/c"}, {}, 2}));
  EXPECT_EQ(Recv(a, 1), U8(kC10dStopWaiting));
}

TEST_F(C10dQueueBarrierTest, BadNewQueriesDropOnlyThatClientWithAReason) {
  Socket good = Raw();
  Send(good, Encode({C10dQuery::kQueuePush, {"/q"}, {"kept"}, 0}));
  {  // BARRIER on a value that is no number: dropped (torch's server too).
    Socket s = Raw();
    Send(s, Encode({C10dQuery::kSet, {"/text"}, {"abc"}, 0}) +
                Encode({C10dQuery::kBarrier, {"/text"}, {}, 2}));
    EXPECT_TRUE(ServerCloses(s));
    ExpectLogged(s,
                 "c10d query 18 refused: Add on key 'text': its value 'abc' "
                 "is not a decimal int64");
  }
  {  // A second WAIT while one is parked.
    Socket s = Raw();
    Send(s, Encode({C10dQuery::kWait, {"/p1"}, {}, 0}) +
                Encode({C10dQuery::kBarrier, {"/p2"}, {}, 2}));
    EXPECT_TRUE(ServerCloses(s));
    ExpectLogged(s,
                 "c10d query 18 (WAIT or BARRIER) arrived while an earlier "
                 "WAIT or BARRIER of the connection was still waiting; "
                 "devmesh serves one at a time per connection");
  }
  {  // An unknown query type.
    Socket s = Raw();
    Send(s, std::string("\x13", 1));
    EXPECT_TRUE(ServerCloses(s));
    ExpectLogged(s,
                 "c10d query type 19 is unknown (torch 2.15's client sends 0 "
                 "to 18)");
  }
  for (C10dQuery q : {C10dQuery::kQueuePush, C10dQuery::kQueuePop,
                      C10dQuery::kQueueLen, C10dQuery::kBarrier}) {
    const int type = static_cast<int>(q);
    {  // A key length over the limit.
      Socket s = Raw();
      Send(s, U8(type) + I64(int64_t{1} << 40));
      EXPECT_TRUE(ServerCloses(s)) << type;
      ExpectLogged(s, absl::StrCat("c10d query ", type,
                                   ": the key is longer than the limit of ",
                                   kMaxKeyBytes + 1, " bytes"));
    }
    {  // Half a request, then the client vanishes: nothing of it lands.
      Socket s = Raw();
      std::vector<absl::string_view> values;
      if (q == C10dQuery::kQueuePush) values.push_back("v");
      const std::string whole = Encode({q, {"/half"}, values, 1});
      Send(s, whole.substr(0, whole.size() - 1));
    }
    {  // Garbage after a whole request: that request is served first.
      Socket s = Raw();
      Send(s, Encode({C10dQuery::kQueuePush, {"/g"}, {"x"}, 0}) + U8(type) +
                  std::string(8, '\xff'));
      EXPECT_TRUE(ServerCloses(s)) << type;
    }
  }
  {  // A QUEUE_PUSH value over the limit.
    Socket s = Raw();
    Send(s, U8(14) + Str("/q") + I64(int64_t{kMaxValueBytes} + 1));
    EXPECT_TRUE(ServerCloses(s));
    ExpectLogged(s, absl::StrCat("c10d query 14: a value is longer than the "
                                 "limit of ", kMaxValueBytes, " bytes"));
  }
  // The good client and the data are untouched; the half requests left
  // nothing (no "/half" key, queue or counter).
  Send(good, Encode({C10dQuery::kQueueLen, {"/q"}, {}, 0}) +
                 Encode({C10dQuery::kQueueLen, {"/g"}, {}, 0}) +
                 Encode({C10dQuery::kQueueLen, {"/half"}, {}, 0}) +
                 Encode({C10dQuery::kCheck, {"/half"}, {}, 0}) +
                 Encode({C10dQuery::kQueuePop, {"/q"}, {}, 0}));
  const std::string want = I64(1) + I64(4) + I64(0) + U8(kC10dNotReady) +
                           I64(1) + Str("kept");
  EXPECT_EQ(Recv(good, want.size()), want);
}

}  // namespace
}  // namespace devmesh
