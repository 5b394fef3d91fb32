// Part of //tests/store:c10d_store_test: what devmesh's store server
// does with c10d's APPEND, LIST_KEYS and the empty key (torch's set("")
// sends the key "/"), byte for byte on raw sockets, as torch's client sends
// them (no reply is read after APPEND or SET, so a dropped client would lose
// both); the kAppend / kListKeys ops of devmesh's own wire format behind
// them, and KvTable::Append / Keys.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/c10d_wire_format.h"
#include "store/kv_table.h"
#include "store/socket.h"
#include "store/store_limits.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "store/wire_format.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

class C10dAppendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TcpStoreServer::Start(TcpStoreServerOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  // A raw c10d connection that has sent its VALIDATE.
  Socket Raw() {
    auto s = Socket::Connect("127.0.0.1", server_->port(), Deadline());
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return Socket();
    EXPECT_TRUE(
        s->SendAll(Encode({C10dQuery::kValidate, {}, {}, kC10dMagic}),
                   Deadline())
            .ok());
    return std::move(*s);
  }
  std::unique_ptr<TcpStoreClient> Devmesh() {
    TcpStoreClientOptions options;
    options.port = server_->port();
    auto d = TcpStoreClient::Connect(options);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }
  static std::string Encode(const C10dRequest& r) {
    return EncodeC10dRequest(r);
  }
  static absl::Time Deadline() { return absl::Now() + absl::Seconds(10); }
  // Receives exactly `n` bytes.
  static std::string Recv(Socket& s, size_t n) {
    std::string got(n, '\0');
    absl::Status st = s.RecvAll(got.data(), n, Deadline());
    EXPECT_TRUE(st.ok()) << st;
    return got;
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(C10dAppendTest, AppendThenSetThenGetSeesBoth) {
  Socket s = Raw();
  std::string req;
  req += Encode({C10dQuery::kAppend, {"/ap"}, {"x"}, 0});  // creates
  req += Encode({C10dQuery::kAppend, {"/ap"}, {"yz"}, 0});  // concatenates
  req += Encode({C10dQuery::kSet, {"/after"}, {"1"}, 0});
  req += Encode({C10dQuery::kGet, {"/ap"}, {}, 0});
  req += Encode({C10dQuery::kGet, {"/after"}, {}, 0});
  req += Encode({C10dQuery::kGetNumKeys, {}, {}, 0});
  ASSERT_TRUE(s.SendAll(req, Deadline()).ok());
  std::string want;
  AppendC10dString(want, "xyz");
  AppendC10dString(want, "1");
  AppendC10dI64(want, 2);
  EXPECT_EQ(Recv(s, want.size()), want);
  // Another client, of the other protocol, sees both keys.
  auto d = Devmesh();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(*d->Get("ap"), "xyz");
  EXPECT_EQ(*d->Get("after"), "1");
}

TEST_F(C10dAppendTest, AppendWakesAParkedWait) {
  Socket waiter = Raw();
  ASSERT_TRUE(
      waiter.SendAll(Encode({C10dQuery::kWait, {"/w"}, {}, 0}), Deadline())
          .ok());
  absl::SleepFor(absl::Milliseconds(100));  // let the WAIT park first
  Socket writer = Raw();
  ASSERT_TRUE(writer
                  .SendAll(Encode({C10dQuery::kAppend, {"/w"}, {"v"}, 0}) +
                               Encode({C10dQuery::kGet, {"/w"}, {}, 0}),
                           Deadline())
                  .ok());
  std::string stop;
  AppendC10dU8(stop, kC10dStopWaiting);
  EXPECT_EQ(Recv(waiter, 1), stop);
  std::string value;
  AppendC10dString(value, "v");
  EXPECT_EQ(Recv(writer, value.size()), value);
}

TEST_F(C10dAppendTest, EmptyKeyIsStoredAsTorchsServerDoes) {
  Socket s = Raw();
  std::string req;
  req += Encode({C10dQuery::kSet, {"/"}, {"e"}, 0});  // torch's set("", "e")
  req += Encode({C10dQuery::kAppend, {"/"}, {"f"}, 0});
  req += Encode({C10dQuery::kGet, {"/"}, {}, 0});
  req += Encode({C10dQuery::kCheck, {"/", "/nope"}, {}, 0});
  req += Encode({C10dQuery::kCheck, {"/"}, {}, 0});
  req += Encode({C10dQuery::kAdd, {"/"}, {}, 1});  // "ef" is no number...
  ASSERT_TRUE(s.SendAll(req, Deadline()).ok());
  std::string want;
  AppendC10dString(want, "ef");
  AppendC10dU8(want, kC10dNotReady);
  AppendC10dU8(want, kC10dReady);
  EXPECT_EQ(Recv(s, want.size()), want);
  char more;  // ... so the server drops the client after the replies above
  EXPECT_EQ(s.RecvAll(&more, 1, Deadline()).code(),
            absl::StatusCode::kUnavailable);
  Socket t = Raw();
  ASSERT_TRUE(t.SendAll(Encode({C10dQuery::kDeleteKey, {"/"}, {}, 0}) +
                            Encode({C10dQuery::kGetNumKeys, {}, {}, 0}),
                        Deadline())
                  .ok());
  want.clear();
  AppendC10dI64(want, 1);  // removed
  AppendC10dI64(want, 0);
  EXPECT_EQ(Recv(t, want.size()), want);
}

TEST_F(C10dAppendTest, AppendPastTheValueLimitDropsTheClientOnly) {
  auto d = Devmesh();
  ASSERT_NE(d, nullptr);
  const std::string full(kMaxValueBytes, 'a');
  ASSERT_TRUE(d->Set("big", full).ok());
  Socket s = Raw();
  ASSERT_TRUE(
      s.SendAll(Encode({C10dQuery::kAppend, {"/big"}, {"b"}, 0}), Deadline())
          .ok());
  char byte;
  EXPECT_EQ(s.RecvAll(&byte, 1, Deadline()).code(),
            absl::StatusCode::kUnavailable);
  auto after = d->Get("big");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->size(), kMaxValueBytes);
  EXPECT_EQ(*after, full);
}

TEST_F(C10dAppendTest, ListKeysGivesEveryKeySortedWithTheSlash) {
  auto d = Devmesh();
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->Set("b/devmesh", "1").ok());
  Socket s = Raw();
  std::string req;
  req += Encode({C10dQuery::kListKeys, {}, {}, 0});  // one key so far
  req += Encode({C10dQuery::kSet, {"/a"}, {"2"}, 0});
  req += Encode({C10dQuery::kSet, {"init/"}, {"3"}, 0});  // no "/" (raw)
  req += Encode({C10dQuery::kSet, {"/"}, {"4"}, 0});      // the empty key
  req += Encode({C10dQuery::kListKeys, {}, {}, 0});
  ASSERT_TRUE(s.SendAll(req, Deadline()).ok());
  std::string want;
  AppendC10dI64(want, 1);
  AppendC10dString(want, "/b/devmesh");
  AppendC10dI64(want, 4);
  for (const char* k : {"/", "/a", "/b/devmesh", "/init/"}) {
    AppendC10dString(want, k);
  }
  EXPECT_EQ(Recv(s, want.size()), want);
}

TEST(StoreWireAppendTest, NewOpsRoundTripAndOpTwentyIsUnknown) {
  const std::string frame = EncodeRequest({Op::kAppend, {"k"}, {"v"}, 0});
  // u32 length, op, u32 4+1 key, u32 4+1 value
  ASSERT_EQ(frame.size(), 4u + 1 + 5 + 5);
  EXPECT_EQ(frame[4], '\x0c');
  auto r = DecodeRequest(absl::string_view(frame).substr(4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->op, Op::kAppend);
  EXPECT_EQ(r->keys, (std::vector<absl::string_view>{"k"}));
  EXPECT_EQ(r->values, (std::vector<absl::string_view>{"v"}));
  const std::string list = EncodeRequest({Op::kListKeys, {}, {}, 0});
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list[4], '\x0d');
  auto l = DecodeRequest(absl::string_view(list).substr(4));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->op, Op::kListKeys);
  EXPECT_TRUE(l->keys.empty());
  // kDeletePrefix (19): one key, the prefix.
  const std::string prefix = EncodeRequest({Op::kDeletePrefix, {"g/"}, {}, 0});
  ASSERT_EQ(prefix.size(), 4u + 1 + 4 + 2);
  EXPECT_EQ(prefix[4], '\x13');
  auto d = DecodeRequest(absl::string_view(prefix).substr(4));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->op, Op::kDeletePrefix);
  EXPECT_EQ(d->keys, (std::vector<absl::string_view>{"g/"}));
  // What a server before them answered for 12 to 19, a server now for 20.
  absl::StatusOr<Request> unknown = DecodeRequest(std::string("\x14", 1));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "unknown request op 20");
  const std::string many =
      EncodeRequest({Op::kMultiGetOrEmpty, {"a", "b"}, {}, 0});
  // u32 length, op, u32 count 2, u32 1 + "a", u32 1 + "b" (no timeout)
  ASSERT_EQ(many.size(), 4u + 1 + 4 + 5 + 5);
  auto m = DecodeRequest(absl::string_view(many).substr(4));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->op, Op::kMultiGetOrEmpty);
  EXPECT_EQ(m->keys, (std::vector<absl::string_view>{"a", "b"}));
  // The server side takes the empty key; the client side refuses it.
  const std::string empty = EncodeRequest({Op::kSet, {""}, {"v"}, 0});
  EXPECT_TRUE(DecodeRequest(absl::string_view(empty).substr(4)).ok());
  EXPECT_EQ(ValidateKey("").code(), absl::StatusCode::kInvalidArgument);
  const std::string long_key =
      EncodeRequest({Op::kSet, {std::string(kMaxKeyBytes + 1, 'k')}, {}, 0});
  EXPECT_EQ(DecodeRequest(absl::string_view(long_key).substr(4))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KvTableAppendTest, CreatesConcatenatesAndKeepsTheLimit) {
  KvTable t;
  EXPECT_EQ(*t.Append("k", "ab"), true);
  EXPECT_EQ(*t.Append("k", "c"), false);
  EXPECT_EQ(*t.Append("k", ""), false);
  EXPECT_EQ(*t.Find("k"), "abc");
  EXPECT_EQ(*t.Append("e", ""), true);  // creates an empty value
  EXPECT_EQ(*t.Find("e"), "");
  ASSERT_TRUE(t.Set("full", std::string(kMaxValueBytes - 1, 'x')));
  EXPECT_EQ(*t.Append("full", "y"), false);  // exactly at the limit
  absl::StatusOr<bool> over = t.Append("full", "z");
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            absl::StrCat("Append on key 'full': ", kMaxValueBytes,
                         " + 1 bytes is over the value limit of ",
                         kMaxValueBytes, " bytes"));
  EXPECT_EQ(t.Find("full")->size(), kMaxValueBytes);
  EXPECT_EQ(t.size(), 3);
  EXPECT_EQ(t.Keys(), (std::vector<absl::string_view>{"e", "full", "k"}));
}

}  // namespace
}  // namespace devmesh
