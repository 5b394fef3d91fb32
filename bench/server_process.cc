#include "bench/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/c10d_store_client.h"
#include "store/tcp_store_client.h"

namespace devmesh::bench {

std::string FindServerBinary() {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("RUNFILES_DIR")) {
    candidates.push_back(absl::StrCat(dir, "/devmesh/store/server"));
  }
  char self[4096] = {0};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    const std::string exe(self, static_cast<size_t>(n));
    candidates.push_back(exe + ".runfiles/devmesh/store/server");
    candidates.push_back(exe.substr(0, exe.rfind('/')) + "/../store/server");
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return std::string();
}

absl::StatusOr<ServerProcess> StartServerProcess(const std::string& bind) {
  const std::string binary = FindServerBinary();
  if (binary.empty()) {
    return absl::NotFoundError(
        "//store:server is not built next to this benchmark (it is a data "
        "dependency: build the benchmark with bazel, e.g. bazel build -c opt "
        "//bench:store_ops)");
  }
  // Built before the fork: the child only calls async-signal-safe functions.
  const std::string bind_flag = "--bind=" + bind;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    dup2(out[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the copy
    execl(binary.c_str(), binary.c_str(), "--port=0", bind_flag.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  ServerProcess server;
  server.pid = pid;
  server.out = fdopen(out[0], "r");
  if (server.out == nullptr) close(out[0]);
  // One line, within 30 s.
  std::string line;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server.out != nullptr && (line.empty() || line.back() != '\n')) {
    pollfd p{out[0], POLLIN, 0};
    const int ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    if (poll(&p, 1, ms) <= 0) break;
    char c = 0;
    if (read(out[0], &c, 1) != 1) break;
    line.push_back(c);
  }
  const size_t colon = line.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(colon + 1)),
                        &server.port)) {
    kill(pid, SIGKILL);
    StopServerProcess(server);
    return absl::InternalError(absl::StrCat(
        binary, " did not print its address within 30 s: '", line, "'"));
  }
  return server;
}

bool StopServerProcess(ServerProcess& server) {
  bool clean = true;
  if (server.pid > 0) {
    kill(server.pid, SIGTERM);
    int status = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    pid_t got = 0;
    while ((got = waitpid(server.pid, &status, WNOHANG)) == 0 &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (got == 0) {
      kill(server.pid, SIGKILL);
      waitpid(server.pid, &status, 0);
    }
    clean = got == server.pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (server.out != nullptr) fclose(server.out);
  server = ServerProcess{};
  return clean;
}

absl::StatusOr<std::unique_ptr<Store>> ConnectBenchClient(
    const std::string& host, int port, bool c10d) {
  if (c10d) {
    C10dStoreClientOptions options;
    options.host = host;
    options.port = port;
    options.connect_timeout = absl::Seconds(60);
    options.default_timeout = absl::Seconds(120);
    auto c = C10dStoreClient::Connect(options);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Store>(*std::move(c));
  }
  TcpStoreClientOptions options;
  options.host = host;
  options.port = port;
  options.connect_timeout = absl::Seconds(60);
  options.default_timeout = absl::Seconds(120);
  auto c = TcpStoreClient::Connect(options);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Store>(*std::move(c));
}

}  // namespace devmesh::bench
