// devmesh's store server speaking PyTorch's c10d protocol, in one process:
// C10dStoreClient against TcpStoreServer (every Store method), one key space
// shared with devmesh-protocol clients, the token rules for c10d clients, and
// raw c10d sockets that misbehave (garbage, half requests, vanishing clients,
// unknown queries). The queue ops, BARRIER and pipelining:
// c10d_queue_barrier_test.cc. Real torch on either side: tests/interop.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/c10d_store_client.h"
#include "store/c10d_wire_format.h"
#include "store/socket.h"
#include "store/store_limits.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

class C10dStoreTest : public ::testing::Test {
 protected:
  void StartServer(std::string token = "", bool c10d_with_token = false) {
    TcpStoreServerOptions options;
    options.token = std::move(token);
    options.c10d_clients_with_token = c10d_with_token;
    auto server = TcpStoreServer::Start(options);  // dual stack
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void SetUp() override { StartServer(); }

  absl::StatusOr<std::unique_ptr<C10dStoreClient>> Connect(
      std::string host = "127.0.0.1") {
    C10dStoreClientOptions options;
    options.host = std::move(host);
    options.port = server_->port();
    options.connect_timeout = absl::Seconds(5);
    options.default_timeout = absl::Seconds(30);
    return C10dStoreClient::Connect(options);
  }
  std::unique_ptr<C10dStoreClient> Client() {
    auto c = Connect();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  Socket Raw() {
    auto s = Socket::Connect("127.0.0.1", server_->port(),
                             absl::Now() + absl::Seconds(5));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : Socket();
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(C10dStoreTest, EveryStoreMethod) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Set("a", "1").ok());
  EXPECT_EQ(*c->Get("a"), "1");
  EXPECT_EQ(*c->Add("n", 5), 5);
  EXPECT_EQ(*c->Add("n", -7), -2);
  EXPECT_EQ(*c->Get("n"), "-2");
  // CompareSet: c10d's rules.
  EXPECT_EQ(*c->CompareSet("cas", "", "first"), "first");  // missing, "" -> set
  EXPECT_EQ(*c->CompareSet("cas2", "x", "y"), "x");  // missing, "x" -> "x"
  EXPECT_FALSE(*c->Check({"cas2"}));
  EXPECT_EQ(*c->CompareSet("cas", "wrong", "z"), "first");
  EXPECT_EQ(*c->CompareSet("cas", "first", "second"), "second");
  EXPECT_TRUE(*c->Check({"a", "n"}));
  EXPECT_FALSE(*c->Check({"a", "missing"}));
  ASSERT_TRUE(c->MultiSet({"m1", "m2"}, {"v1", std::string(5000, 'x')}).ok());
  auto values = c->MultiGet({"m2", "m1"}, absl::Seconds(5));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{std::string(5000, 'x'), "v1"}));
  EXPECT_EQ(*c->NumKeys(), 5);  // a, n, cas, m1, m2
  EXPECT_TRUE(*c->DeleteKey("a"));
  EXPECT_FALSE(*c->DeleteKey("a"));
  EXPECT_EQ(*c->NumKeys(), 4);
  ASSERT_TRUE(c->Append("m1", "+").ok());
  ASSERT_TRUE(c->Append("fresh", "new").ok());  // creates the key
  EXPECT_EQ(*c->Get("m1"), "v1+");
  EXPECT_EQ(*c->Get("fresh"), "new");
  EXPECT_EQ(*c->NumKeys(), 5);
  // GetIfSet over PyTorch's protocol: CHECK, then GET; a missing key is
  // nullopt at once (a Get would wait 30 s here), and creates nothing.
  EXPECT_EQ(*c->GetIfSet("m1"), std::optional<std::string>("v1+"));
  EXPECT_EQ(*c->GetIfSet("missing"), std::nullopt);
  EXPECT_EQ(*c->NumKeys(), 5);
}

TEST_F(C10dStoreTest, DeletePrefixDeletesExactlyTheKeysUnderIt) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->MultiSet({"g/1/a", "g/1/b", "g/10/a", "h"}, {"", "", "", ""})
                  .ok());
  EXPECT_EQ(*c->DeletePrefix("g/1/"), 2);
  EXPECT_EQ(*c->DeletePrefix("g/1/"), 0);
  EXPECT_TRUE(*c->Check({"g/10/a", "h"}));
  EXPECT_EQ(*c->NumKeys(), 2);
}

TEST_F(C10dStoreTest, WaitsTimeOutNamingTheMissingKeyAndWakeUp) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Set("here", "1").ok());
  const absl::Time start = absl::Now();
  absl::Status st = c->Wait({"here", "absent"}, absl::Milliseconds(200));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(st.message(), "store key 'absent' was not set within 200 ms");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  auto g = c->Get("absent", absl::Milliseconds(100));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(c->MultiGet({"here", "absent"}, absl::Milliseconds(100))
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  // The connection that timed out is reused (CANCEL_WAIT left it clean).
  ASSERT_TRUE(c->Set("x", "y").ok());
  // A waiter is woken by a writer on another connection.
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    auto w = Client();
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(w->Set("late", "v").ok());
  });
  auto late = c->Get("late", absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "v");
}

TEST_F(C10dStoreTest, SharesKeysWithDevmeshProtocolClients) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  TcpStoreClientOptions options;
  options.port = server_->port();
  auto d = TcpStoreClient::Connect(options);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(c->Set("from/c10d", "A").ok());
  ASSERT_TRUE((*d)->Set("from/devmesh", "B").ok());
  EXPECT_EQ(*(*d)->Get("from/c10d"), "A");
  EXPECT_EQ(*c->Get("from/devmesh"), "B");
  EXPECT_EQ(*(*d)->Add("ctr", 2), 2);
  EXPECT_EQ(*c->Add("ctr", 3), 5);
  // Add on a value that is no number: the server drops the c10d client,
  // which then reports what the key holds.
  absl::StatusOr<int64_t> bad = c->Add("from/devmesh", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "store key 'from/devmesh' holds 'B', not a decimal int64, so Add "
            "cannot count on it");
}

TEST_F(C10dStoreTest, SixtyFourClientsAddAtOnce) {
  std::vector<std::thread> threads;
  std::vector<int> ok(64, 0);
  for (int t = 0; t < 64; ++t) {
    threads.emplace_back([&, t] {
      auto c = Connect();
      if (!c.ok()) return;
      int good = 0;
      for (int i = 0; i < 50; ++i) good += (*c)->Add("sum", 1).ok();
      ok[t] = good;
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(ok[t], 50) << "client " << t;
  auto c = Client();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(*c->Get("sum"), "3200");
}

// A stopped server (its host refuses new connections): a client that was
// connected gives up on a new connection after reconnect_refused_timeout,
// not connect_timeout, and every later one at its first refusal, as
// TcpStoreClient; the first Connect still waits its connect_timeout for a
// server that may be starting.
TEST_F(C10dStoreTest, StoppedServerFailsWithinTheRefusalBoundThenAtOnce) {
  C10dStoreClientOptions options;
  options.port = server_->port();
  options.connect_timeout = absl::Seconds(60);
  options.reconnect_refused_timeout = absl::Milliseconds(300);
  auto client = C10dStoreClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
  server_.reset();  // nothing listens on the port any more
  // The pooled connection finds the server gone at once; the call after it
  // opens a new one, which is refused.
  EXPECT_EQ((*client)->Set("k", "w").code(), absl::StatusCode::kUnavailable);
  absl::Time start = absl::Now();
  absl::Status refused = (*client)->Add("n", 1).status();
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(Socket::IsRefusal(refused)) << refused;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(5));
  start = absl::Now();
  refused = (*client)->Get("k").status();
  took = absl::Now() - start;
  EXPECT_TRUE(Socket::IsRefusal(refused)) << refused;
  EXPECT_LT(took, absl::Milliseconds(250));

  // The first connection: refused the whole connect_timeout.
  options.connect_timeout = absl::Milliseconds(400);
  start = absl::Now();
  absl::Status first = C10dStoreClient::Connect(options).status();
  EXPECT_TRUE(Socket::IsRefusal(first)) << first;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
}

TEST_F(C10dStoreTest, ConnectsOverIpv6ToTheDualStackServer) {
  auto c = Connect("::1");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Set("v6", "yes").ok());
  auto v4 = Client();
  ASSERT_NE(v4, nullptr);
  EXPECT_EQ(*v4->Get("v6"), "yes");
}

TEST_F(C10dStoreTest, TokenRefusesC10dClientsUnlessAllowed) {
  StartServer("secret");
  EXPECT_EQ(Connect().status().code(), absl::StatusCode::kUnavailable);
  StartServer("secret", /*c10d_with_token=*/true);
  auto c = Connect();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Set("k", "v").ok());
}

TEST(C10dStoreClientTest, BadInputIsRefusedBeforeTheWire) {
  C10dStoreClientOptions options;
  options.port = 0;
  EXPECT_EQ(C10dStoreClient::Connect(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.port = 1;  // nothing listens on port 1
  options.connect_timeout = absl::Milliseconds(100);
  EXPECT_EQ(C10dStoreClient::Connect(options).status().code(),
            absl::StatusCode::kUnavailable);
}

// Reads until the server closes the socket; true when it did.
bool ServerCloses(Socket& s) {
  char buf[1];
  while (true) {
    absl::Status st = s.RecvAll(buf, 1, absl::Now() + absl::Seconds(10));
    if (!st.ok()) return st.code() == absl::StatusCode::kUnavailable;
  }
}

std::string Greeting() {
  return EncodeC10dRequest({C10dQuery::kValidate, {}, {}, kC10dMagic});
}
std::string U64(uint64_t v) {
  char b[8];
  absl::little_endian::Store64(b, v);
  return std::string(b, 8);
}

TEST_F(C10dStoreTest, BadC10dClientsAreDroppedAndOthersKeepWorking) {
  auto before = Client();
  ASSERT_NE(before, nullptr);
  ASSERT_TRUE(before->Set("k", "v").ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (const char* query : {"\x13", "\xff"}) {  // unknown query types
    Socket s = Raw();
    ASSERT_TRUE(s.SendAll(Greeting() + query, deadline).ok());
    EXPECT_TRUE(ServerCloses(s)) << static_cast<int>(query[0]);
  }
  {  // A key length over the limit.
    Socket s = Raw();
    ASSERT_TRUE(
        s.SendAll(Greeting() + "\x01" + U64(uint64_t{1} << 40), deadline)
            .ok());
    EXPECT_TRUE(ServerCloses(s));
  }
  {  // A key count over the limit.
    Socket s = Raw();
    ASSERT_TRUE(
        s.SendAll(Greeting() + "\x06" + U64(uint64_t{1} << 62), deadline).ok());
    EXPECT_TRUE(ServerCloses(s));
  }
  {  // A second VALIDATE.
    Socket s = Raw();
    ASSERT_TRUE(s.SendAll(Greeting() + Greeting(), deadline).ok());
    EXPECT_TRUE(ServerCloses(s));
  }
  {  // Half a SET, then the client vanishes.
    Socket s = Raw();
    std::string set = EncodeC10dRequest({C10dQuery::kSet, {"/half"}, {"x"}, 0});
    ASSERT_TRUE(s.SendAll(Greeting() + set.substr(0, set.size() - 1), deadline)
                    .ok());
  }
  {  // A parked WAIT whose client vanishes.
    Socket s = Raw();
    ASSERT_TRUE(s.SendAll(Greeting() + EncodeC10dRequest(
                                           {C10dQuery::kWait, {"/never"}, {}, 0}),
                          deadline)
                    .ok());
  }
  {  // Garbage bytes: devmesh's parser refuses them.
    Socket s = Raw();
    ASSERT_TRUE(
        s.SendAll(std::string("\x00\xCE\xF7\x85" "garbage", 11), deadline)
            .ok());
    EXPECT_TRUE(ServerCloses(s));
  }
  EXPECT_EQ(*before->Get("k"), "v");
  EXPECT_FALSE(*before->Check({"half"}));
  ASSERT_TRUE(before->Set("never", "set").ok());
  EXPECT_EQ(*before->NumKeys(), 2);
  auto after = Client();
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(*after->Get("never"), "set");
}

TEST_F(C10dStoreTest, RawProtocolRepliesByteForByte) {
  Socket s = Raw();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::string req = Greeting();
  req += EncodeC10dRequest({C10dQuery::kPing, {}, {}, 0xABCD1234});
  req += EncodeC10dRequest({C10dQuery::kSet, {"/k"}, {"val"}, 0});
  req += EncodeC10dRequest({C10dQuery::kGet, {"/k"}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kGet, {"/missing"}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kAdd, {"/n"}, {}, 7});
  req += EncodeC10dRequest({C10dQuery::kCheck, {"/k", "/zz"}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kDeleteKey, {"/k"}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kGetNumKeys, {}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kWait, {"/zz"}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kCancelWait, {}, {}, 0});
  req += EncodeC10dRequest({C10dQuery::kCancelWait, {}, {}, 0});  // not parked
  ASSERT_TRUE(s.SendAll(req, deadline).ok());
  std::string want;
  AppendC10dU32(want, 0xABCD1234);
  AppendC10dString(want, "val");
  AppendC10dString(want, "");
  AppendC10dI64(want, 7);
  AppendC10dU8(want, kC10dNotReady);
  AppendC10dI64(want, 1);
  AppendC10dI64(want, 1);  // "n"
  AppendC10dU8(want, kC10dWaitCanceled);
  AppendC10dU8(want, kC10dWaitCanceled);
  std::string got(want.size(), '\0');
  ASSERT_TRUE(s.RecvAll(got.data(), got.size(), deadline).ok());
  EXPECT_EQ(got, want);
}

TEST(C10dWireFormatTest, DecodesWhatItEncodesAndAsksForTheRest) {
  const std::string bytes = EncodeC10dRequest(
      {C10dQuery::kMultiSet, {"/a", "/bb"}, {"1", "22"}, 0});
  // 1 type + 8 count + (8+2 + 8+1) + (8+3 + 8+2) = 49
  ASSERT_EQ(bytes.size(), 49u);
  const std::string with_more = bytes + "extra";  // the views point in here
  auto whole = DecodeC10dRequest(with_more);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(whole->request.has_value());
  EXPECT_EQ(whole->consumed, 49u);
  EXPECT_EQ(whole->request->keys,
            (std::vector<absl::string_view>{"/a", "/bb"}));
  EXPECT_EQ(whole->request->values,
            (std::vector<absl::string_view>{"1", "22"}));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto part = DecodeC10dRequest(bytes.substr(0, cut));
    ASSERT_TRUE(part.ok()) << cut;
    EXPECT_FALSE(part->request.has_value()) << cut;
    EXPECT_GT(part->need_bytes, cut);
    EXPECT_LE(part->need_bytes, bytes.size());
  }
  const std::string add_bytes =
      EncodeC10dRequest({C10dQuery::kAdd, {"/n"}, {}, -3});
  auto add = DecodeC10dRequest(add_bytes);
  ASSERT_TRUE(add.ok() && add->request.has_value());
  EXPECT_EQ(add->request->number, -3);
  auto list = DecodeC10dRequest("\x11");  // LIST_KEYS: no fields
  ASSERT_TRUE(list.ok() && list->request.has_value());
  EXPECT_EQ(list->request->query, C10dQuery::kListKeys);
  EXPECT_EQ(list->consumed, 1u);
  for (const char* query : {"\x0e", "\x0f", "\x10", "\x12"}) {
    auto half = DecodeC10dRequest(query);  // the queue ops, BARRIER: a key next
    ASSERT_TRUE(half.ok()) << half.status();
    EXPECT_FALSE(half->request.has_value());
    EXPECT_EQ(half->need_bytes, 9u);
  }
  EXPECT_EQ(DecodeC10dRequest("\x13").status().message(),
            "c10d query type 19 is unknown (torch 2.15's client sends 0 to 18)");
  EXPECT_TRUE(IsC10dGreeting(Greeting()));
  EXPECT_TRUE(CouldBeC10dGreeting(Greeting().substr(0, 3)));
  EXPECT_FALSE(CouldBeC10dGreeting("\x05"));
}

// A key-list request that arrives in pieces is decoded with a C10dScan that
// resumes where the last try stopped (the server's session does so, so that
// a 1M-key MULTI_SET costs linear, not quadratic, time): at every cut the
// answer is the one a decode from scratch gives, and the scan has moved on.
TEST(C10dWireFormatTest, ScanResumesAndAgreesWithDecodeFromScratch) {
  std::vector<std::string> keys, values;
  for (int i = 0; i < 40; ++i) {
    keys.push_back(absl::StrCat("/key", i));
    values.push_back(std::string(i % 5, 'v'));
  }
  C10dRequest r{C10dQuery::kMultiSet, {}, {}, 0};
  for (int i = 0; i < 40; ++i) {
    r.keys.push_back(keys[i]);
    r.values.push_back(values[i]);
  }
  const std::string bytes = EncodeC10dRequest(r);
  C10dScan scan;
  uint64_t last_strings = 0;
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    const std::string part = bytes.substr(0, cut);
    auto plain = DecodeC10dRequest(part);
    auto scanned = DecodeC10dRequest(part, &scan);
    ASSERT_TRUE(plain.ok() && scanned.ok()) << cut;
    ASSERT_EQ(plain->request.has_value(), scanned->request.has_value()) << cut;
    EXPECT_EQ(plain->need_bytes, scanned->need_bytes) << cut;
    EXPECT_GE(scan.strings, last_strings) << cut;
    last_strings = scan.strings;
    if (scanned->request) {
      EXPECT_EQ(cut, bytes.size());
      EXPECT_EQ(scanned->consumed, bytes.size());
      EXPECT_EQ(scanned->request->keys, plain->request->keys);
      EXPECT_EQ(scanned->request->values, plain->request->values);
    }
  }
  EXPECT_EQ(last_strings, 79u);  // 80 strings; the last one ends the request
  // A value over the limit in the middle is refused on the scanned path too.
  std::string bad = EncodeC10dRequest({C10dQuery::kMultiSet, {"/a"}, {}, 0});
  bad.resize(1 + 8 + 8 + 2);  // type, count, key
  AppendC10dI64(bad, int64_t{kMaxValueBytes} + 1);
  C10dScan bad_scan;
  EXPECT_EQ(DecodeC10dRequest(bad, &bad_scan).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace devmesh
