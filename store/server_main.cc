// bazel run //store:server -- [--port=P] [--bind=ADDR] [--token=T]
//     [--c10d_clients_with_token]
// A standalone store server: serves devmesh's protocol and PyTorch's c10d
// TCPStore protocol (both on one port, as TcpStoreServer does) until SIGTERM
// or SIGINT, so that the store outlives every rank of a job. Prints one line
// once it accepts connections:
//   devmesh store server listening on ADDR:PORT
// (ADDR is --bind, "[::]" for the default dual-stack bind; PORT is the
// chosen port when --port=0), and on a signal "devmesh store server:
// stopped by SIGTERM", then exits 0. Exit 2 on bad flags or when the port
// cannot be bound (the reason on stderr). Dropped c10d clients are logged on
// stderr with their reason.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/tcp_store_server.h"

ABSL_FLAG(int, port, 29500,
          "TCP port to listen on (0 = a free port, printed when ready)");
ABSL_FLAG(std::string, bind, "",
          "address to bind: empty or :: = every interface of both families "
          "(as torch's server), 0.0.0.0 = every IPv4 interface, 127.0.0.1 = "
          "loopback only, or a host name / IPv6 literal");
ABSL_FLAG(std::string, token, "",
          "shared secret a devmesh client must present (the ranks' "
          "DEVMESH_STORE_TOKEN); empty = $DEVMESH_STORE_TOKEN, which keeps "
          "it out of the process list");
ABSL_FLAG(bool, c10d_clients_with_token, false,
          "with a token, still serve c10d (PyTorch) clients, which cannot "
          "present one (only on a trusted network)");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "devmesh store server: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "server [--port=P] [--bind=ADDR] [--token=T] "
      "[--c10d_clients_with_token]: a devmesh / c10d store until SIGTERM");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    return Fail(absl::StrCat("unexpected argument '", rest[1],
                             "' (flags only; see --help)"));
  }
  devmesh::TcpStoreServerOptions options;
  options.port = absl::GetFlag(FLAGS_port);
  options.host = absl::GetFlag(FLAGS_bind);
  options.token = absl::GetFlag(FLAGS_token);
  if (options.token.empty()) {
    const char* env = std::getenv("DEVMESH_STORE_TOKEN");
    if (env != nullptr) options.token = env;
  }
  options.c10d_clients_with_token = absl::GetFlag(FLAGS_c10d_clients_with_token);
  if (options.port < 0 || options.port > 65535) {
    return Fail(absl::StrCat("--port=", options.port,
                             " is outside 0..65535"));
  }
  // Block the signals before the server's thread starts (it inherits the
  // mask), so that only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<devmesh::TcpStoreServer>> server =
      devmesh::TcpStoreServer::Start(options);
  if (!server.ok()) return Fail(server.status().ToString());
  std::string addr = options.host;
  if (addr.empty()) addr = "::";
  if (absl::StrContains(addr, ':')) addr = absl::StrCat("[", addr, "]");
  std::printf("devmesh store server listening on %s:%d\n", addr.c_str(),
              (*server)->port());
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  const devmesh::TcpStoreServerStats stats = (*server)->stats();
  server->reset();  // stops the loop, drops every client, joins the thread
  std::printf(
      "devmesh store server: stopped by %s after serving %lld requests "
      "(%lld payload bytes) from %lld connections\n",
      sig == SIGTERM ? "SIGTERM" : "SIGINT",
      static_cast<long long>(stats.requests),
      static_cast<long long>(stats.request_bytes),
      static_cast<long long>(stats.connections));
  std::fflush(stdout);
  return 0;
}
