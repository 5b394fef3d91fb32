// The standalone server binary (//store:server) as a user runs it: it
// prints its address once ready, serves devmesh-protocol and c10d clients
// on one port (one key space), and SIGTERM / SIGINT stop it with exit code 0
// within a bound, even while a client is parked in a Get. Bad flags and a
// port in use exit 2 with the reason.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "store/c10d_store_client.h"
#include "store/socket.h"
#include "store/tcp_store_client.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

constexpr char kServer[] = "store/server";

// The server binary with its stdout and stderr on one pipe to us.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& flags) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      std::string path = kServer;
      argv.push_back(path.data());
      std::vector<std::string> copy = flags;
      for (std::string& f : copy) argv.push_back(f.data());
      argv.push_back(nullptr);
      execv(path.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  // The next line of output, or "" after `timeout` or at EOF.
  std::string ReadLine(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      size_t nl = buffered_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      const int ms = static_cast<int>(
          absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (ms <= 0) return "";
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, ms) <= 0) continue;
      char buf[4096];
      ssize_t n = read(out_, buf, sizeof(buf));
      if (n <= 0) return "";
      buffered_.append(buf, static_cast<size_t>(n));
    }
  }
  // The exit code (128 + signal when killed by one), or -1 when it is still
  // running after `timeout` (then it is killed).
  int Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) return -1;
      absl::SleepFor(absl::Milliseconds(5));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void Signal(int sig) { kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffered_;
};

// The port in "devmesh store server listening on <addr>:<port>", or 0.
int PortFrom(absl::string_view line, absl::string_view addr) {
  int port = 0;
  if (!absl::ConsumePrefix(
          &line, absl::StrCat("devmesh store server listening on ", addr,
                              ":")) ||
      !absl::SimpleAtoi(line, &port)) {
    return 0;
  }
  return port;
}

void ServeThenStop(int sig, absl::string_view name) {
  ServerProcess server({"--port=0", "--bind=127.0.0.1"});
  const std::string ready = server.ReadLine(absl::Seconds(30));
  const int port = PortFrom(ready, "127.0.0.1");
  ASSERT_GT(port, 0) << ready;
  TcpStoreClientOptions d;
  d.port = port;
  auto devmesh = TcpStoreClient::Connect(d);
  ASSERT_TRUE(devmesh.ok()) << devmesh.status();
  C10dStoreClientOptions c;
  c.port = port;
  auto c10d = C10dStoreClient::Connect(c);
  ASSERT_TRUE(c10d.ok()) << c10d.status();
  ASSERT_TRUE((*devmesh)->Set("from/devmesh", "A").ok());
  ASSERT_TRUE((*c10d)->Set("from/c10d", "B").ok());
  EXPECT_EQ(*(*c10d)->Get("from/devmesh"), "A");
  EXPECT_EQ(*(*devmesh)->Get("from/c10d"), "B");
  EXPECT_EQ(*(*c10d)->Add("n", 2), 2);
  EXPECT_EQ(*(*devmesh)->Add("n", 3), 5);
  EXPECT_EQ(*(*devmesh)->NumKeys(), 3);
  // A client parked in a Get does not hold the server up.
  absl::Status parked;
  std::thread waiter([&] {
    parked = (*devmesh)->Get("never", absl::Seconds(60)).status();
  });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  server.Signal(sig);
  EXPECT_EQ(server.Wait(absl::Seconds(5)), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  waiter.join();
  EXPECT_EQ(parked.code(), absl::StatusCode::kUnavailable) << parked;
  // Its counts: the two clients above, and every request they sent
  // (handshakes and the parked Get included), the same on every run.
  EXPECT_EQ(server.ReadLine(absl::Seconds(5)),
            absl::StrCat("devmesh store server: stopped by ", name,
                         " after serving 11 requests (190 payload bytes) "
                         "from 2 connections"));
  // Nothing listens there any more.
  EXPECT_FALSE(
      Socket::Connect("127.0.0.1", port, absl::Now() + absl::Milliseconds(200))
          .ok());
}

TEST(StoreServerTest, ServesBothProtocolsUntilSigterm) {
  ServeThenStop(SIGTERM, "SIGTERM");
}

TEST(StoreServerTest, ServesBothProtocolsUntilSigint) {
  ServeThenStop(SIGINT, "SIGINT");
}

TEST(StoreServerTest, DefaultBindIsDualStackAndTheTokenIsEnforced) {
  ServerProcess server({"--port=0", "--token=s3cret"});
  const std::string ready = server.ReadLine(absl::Seconds(30));
  const int port = PortFrom(ready, "[::]");
  ASSERT_GT(port, 0) << ready;
  TcpStoreClientOptions wrong;
  wrong.host = "::1";
  wrong.port = port;
  wrong.token = "guess";
  EXPECT_EQ(TcpStoreClient::Connect(wrong).status().code(),
            absl::StatusCode::kPermissionDenied);
  TcpStoreClientOptions right = wrong;
  right.host = "127.0.0.1";
  right.token = "s3cret";
  auto client = TcpStoreClient::Connect(right);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
  EXPECT_EQ(*(*client)->Get("k"), "v");
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(absl::Seconds(5)), 0);
}

TEST(StoreServerTest, BadFlagsAndABusyPortExitTwoWithTheReason) {
  {
    ServerProcess server({"--port=70000"});
    EXPECT_EQ(server.ReadLine(absl::Seconds(30)),
              "devmesh store server: --port=70000 is outside 0..65535");
    EXPECT_EQ(server.Wait(absl::Seconds(10)), 2);
  }
  {
    ServerProcess server({"--port=0", "stray"});
    EXPECT_EQ(server.ReadLine(absl::Seconds(30)),
              "devmesh store server: unexpected argument 'stray' (flags "
              "only; see --help)");
    EXPECT_EQ(server.Wait(absl::Seconds(10)), 2);
  }
  auto busy = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(busy.ok()) << busy.status();
  const int port = *busy->LocalPort();
  ServerProcess server({absl::StrCat("--port=", port), "--bind=127.0.0.1"});
  const std::string line = server.ReadLine(absl::Seconds(30));
  EXPECT_TRUE(absl::StartsWith(line, "devmesh store server: UNAVAILABLE: "))
      << line;
  EXPECT_TRUE(absl::StrContains(line, absl::StrCat("127.0.0.1:", port)))
      << line;
  EXPECT_EQ(server.Wait(absl::Seconds(10)), 2);
}

}  // namespace
}  // namespace devmesh
