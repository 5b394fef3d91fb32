#include "bench/server_process.h"

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
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
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const std::string bind_flag = "--bind=" + bind;
    execl(binary.c_str(), binary.c_str(), "--port=0", bind_flag.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  ServerProcess server;
  server.pid = pid;
  // The read end stays open, so the server's last line (at SIGTERM) has a
  // reader.
  FILE* f = fdopen(out[0], "r");
  char line[256] = {0};
  const bool got = f != nullptr && fgets(line, sizeof(line), f) != nullptr;
  const char* colon = got ? std::strrchr(line, ':') : nullptr;
  if (colon == nullptr ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(colon + 1), &server.port)) {
    StopServerProcess(server);
    return absl::InternalError(
        absl::StrCat(binary, " did not print its address: '", line, "'"));
  }
  return server;
}

void StopServerProcess(ServerProcess& server) {
  if (server.pid > 0) {
    kill(server.pid, SIGTERM);
    waitpid(server.pid, nullptr, 0);
  }
  server.pid = -1;
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
