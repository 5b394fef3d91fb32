// Both directions of the c10d wire with real torch (the venv of
// tools/install_torch.sh): devmesh's C10dStoreClient against
// torch.distributed.TCPStore's own (libuv) server, and torch's client against
// devmesh's TcpStoreServer (every query torch 2.15's client sends, and a
// torch process group on //bootstrap:launch --host_store's store). Skips
// without torch unless DEVMESH_REQUIRE_TORCH=1.
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bootstrap/launcher.h"
#include "store/c10d_store_client.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "gtest/gtest.h"
#include "tests/interop/torch_env.h"

namespace devmesh {
namespace {

using interop::Child;
using interop::TorchVenv;

constexpr char kServerScript[] = "tests/interop/torch_store_server.py";
constexpr char kClientScript[] = "tests/interop/torch_store_client.py";

class TorchServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DEVMESH_GET_TORCH_OR_SKIP(venv_);
    auto child = Child::Start({venv_.python, kServerScript});
    ASSERT_TRUE(child.ok()) << child.status();
    server_ = std::make_unique<Child>(*std::move(child));
    auto line = server_->ReadLine(absl::Seconds(60));
    ASSERT_TRUE(line.ok()) << line.status();
    absl::string_view rest = *line;
    ASSERT_TRUE(absl::ConsumePrefix(&rest, "port ")) << *line;
    ASSERT_TRUE(absl::SimpleAtoi(rest, &port_)) << *line;
  }
  void TearDown() override {
    if (server_ == nullptr) return;
    server_->CloseStdin();
    EXPECT_EQ(server_->Wait(absl::Seconds(30)), 0);
  }
  absl::StatusOr<std::unique_ptr<C10dStoreClient>> Connect() {
    C10dStoreClientOptions options;
    options.port = port_;
    options.connect_timeout = absl::Seconds(10);
    options.default_timeout = absl::Seconds(30);
    return C10dStoreClient::Connect(options);
  }
  // A command to the Python side; its one-line answer.
  std::string Ask(const std::string& command) {
    EXPECT_TRUE(server_->WriteLine(command).ok());
    auto line = server_->ReadLine(absl::Seconds(30));
    return line.ok() ? *line : line.status().ToString();
  }

  TorchVenv venv_;
  std::unique_ptr<Child> server_;
  int port_ = 0;
};

TEST_F(TorchServerTest, EveryStoreMethodAgainstTorchsServer) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  C10dStoreClient& c = **client;
  ASSERT_TRUE(c.Set("a", "1").ok());
  EXPECT_EQ(*c.Get("a"), "1");
  EXPECT_EQ(*c.Add("n", 5), 5);
  EXPECT_EQ(*c.Add("n", -7), -2);
  EXPECT_EQ(*c.Get("n"), "-2");
  EXPECT_EQ(*c.CompareSet("cas", "", "first"), "first");
  EXPECT_EQ(*c.CompareSet("cas2", "x", "y"), "x");
  EXPECT_FALSE(*c.Check({"cas2"}));
  EXPECT_EQ(*c.CompareSet("cas", "wrong", "z"), "first");
  EXPECT_EQ(*c.CompareSet("cas", "first", "second"), "second");
  EXPECT_TRUE(*c.Check({"a", "n"}));
  EXPECT_FALSE(*c.Check({"a", "missing"}));
  ASSERT_TRUE(c.MultiSet({"m1", "m2"}, {"v1", std::string(5000, 'x')}).ok());
  auto values = c.MultiGet({"m2", "m1"}, absl::Seconds(5));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{std::string(5000, 'x'), "v1"}));
  ASSERT_TRUE(c.Append("m1", "+2").ok());
  EXPECT_EQ(*c.Get("m1"), "v1+2");
  EXPECT_EQ(*c.NumKeys(), 5);  // a, n, cas, m1, m2
  EXPECT_TRUE(*c.DeleteKey("a"));
  EXPECT_FALSE(*c.DeleteKey("a"));
  EXPECT_EQ(*c.NumKeys(), 4);
  EXPECT_EQ(Ask("num_keys"), "num_keys 4");
  // Keys carry PyTorch's "/": Python sees "k" where devmesh wrote "k".
  ASSERT_TRUE(c.Set("cpp/x", "hello").ok());
  EXPECT_EQ(Ask("get cpp/x"), "value hello");
  EXPECT_EQ(Ask("set py/y world"), "ok");
  EXPECT_EQ(*c.Get("py/y"), "world");
  // Add on text torch cannot parse: its server drops us; Add says why.
  ASSERT_TRUE(c.Set("text", "abc").ok());
  auto bad = c.Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument)
      << bad.status();
  EXPECT_EQ(*c.Get("py/y"), "world") << "the client reconnects";
}

TEST_F(TorchServerTest, WaitTimeoutsCancelCleanlyAndWakeUps) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  C10dStoreClient& c = **client;
  ASSERT_TRUE(c.Set("here", "1").ok());
  const absl::Time start = absl::Now();
  absl::Status st = c.Wait({"here", "absent"}, absl::Milliseconds(300));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(st.message(), "store key 'absent' was not set within 300 ms");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ(c.Get("absent", absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(c.MultiGet({"here", "absent"}, absl::Milliseconds(100))
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(c.Set("x", "y").ok());  // the cancelled connection still works
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_EQ(Ask("set late v"), "ok");
  });
  auto late = c.Get("late", absl::Seconds(20));
  writer.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "v");
}

TEST_F(TorchServerTest, SixtyFourClientsAddAtOnce) {
  constexpr int kClients = 64, kAdds = 50;
  std::vector<std::thread> threads;
  std::vector<int> ok(kClients, 0);
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      auto c = Connect();
      if (!c.ok()) return;
      for (int i = 0; i < kAdds; ++i) ok[t] += (*c)->Add("sum", 1).ok();
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kClients; ++t) EXPECT_EQ(ok[t], kAdds) << "client " << t;
  EXPECT_EQ(Ask("get sum"), absl::StrCat("value ", kClients * kAdds));
}

TEST(TorchClientTest, TorchsClientAgainstDevmeshServer) {
  TorchVenv venv;
  DEVMESH_GET_TORCH_OR_SKIP(venv);
  for (const char* host : {"127.0.0.1", "::1"}) {
    auto server = TcpStoreServer::Start({});  // dual stack, no token
    ASSERT_TRUE(server.ok()) << server.status();
    TcpStoreClientOptions options;
    options.port = (*server)->port();
    auto cpp = TcpStoreClient::Connect(options);
    ASSERT_TRUE(cpp.ok()) << cpp.status();
    ASSERT_TRUE((*cpp)->Set("cpp/hello", "from devmesh").ok());
    auto child = Child::Start(
        {venv.python, kClientScript, host, absl::StrCat((*server)->port())});
    ASSERT_TRUE(child.ok()) << child.status();
    const int code = child->Wait(absl::Seconds(120));
    const std::string out = child->ReadRest(absl::Seconds(1));
    EXPECT_EQ(code, 0) << host << ": " << out;
    EXPECT_EQ(out, "all torch client checks passed\n");
    EXPECT_EQ(*(*cpp)->Get("py/done", absl::Seconds(5)), "yes");
    EXPECT_EQ(*(*cpp)->Get("py/n"), "3");
    EXPECT_EQ(*(*cpp)->Get("py/ap"), "xyz");
    EXPECT_EQ(*(*cpp)->Get("py/after_append"), "1");
    EXPECT_FALSE(*(*cpp)->Check({"py/k"}));
    // The queue and barrier part: its sets landed, the counters are keys.
    EXPECT_EQ(*(*cpp)->Get("py/after_push"), "push");
    EXPECT_EQ(*(*cpp)->Get("py/after_woken_pop"), "woken_pop");
    EXPECT_EQ(*(*cpp)->Get("py/after_cancelled_pop"), "cancelled_pop");
    EXPECT_EQ(*(*cpp)->Get("py/after_barrier7"), "barrier7");
    EXPECT_EQ(*(*cpp)->Get("py/bar"), "8");
    EXPECT_EQ(*(*cpp)->Get("py/half_barrier"), "1");
    EXPECT_FALSE(*(*cpp)->Check({"py/q"}));  // queues are not keys
  }
}

// PyTorch's own process group under //bootstrap:launch --host_store: the
// launcher's store serves torch's env:// rendezvous, Gloo's key exchange,
// barriers and the queue ops of three real torch ranks.
TEST(TorchClientTest, TorchProcessGroupOnTheLaunchersStore) {
  TorchVenv venv;
  DEVMESH_GET_TORCH_OR_SKIP(venv);
  char out_path[] = "/tmp/torch_pg_outXXXXXX";
  const int out = mkstemp(out_path);
  ASSERT_GE(out, 0);
  unlink(out_path);
  LaunchOptions options;
  options.nproc = 3;
  options.host_store = true;
  options.argv = {venv.python, "tests/interop/torch_pg_rank.py"};
  options.stdout_fd = out;
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  std::string text(1 << 16, '\0');
  const ssize_t n = pread(out, text.data(), text.size(), 0);
  close(out);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  EXPECT_EQ(*code, 0) << text;
  EXPECT_NE(text.find("[rank 0] rank 0 sum 6 popped 0,1,2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[rank 1] rank 1 sum 6\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 2] rank 2 sum 6\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace devmesh
