#include "bench/store_peers.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "store/c10d_store_client.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace devmesh::bench {
namespace {

// The Python host of torch's TCPStore: raises its fd limit (4096 clients),
// prints "port N pid P", and lives until its parent (this process) is gone
// or it is signalled.
constexpr char kTorchHost[] = R"py(
import datetime, os, resource, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
import torch.distributed as dist
parent = os.getppid()
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=300))
print("port", store.port, "pid", os.getpid(), flush=True)
while os.getppid() == parent:
    time.sleep(0.5)
)py";

TcpStoreServer* devmesh_server = nullptr;
int torch_port = 0;
pid_t torch_pid = -1;

absl::StatusOr<std::string> StartTorch() {
  const char* env = std::getenv("DEVMESH_TORCH_VENV");
  const std::string venv =
      env != nullptr && *env != '\0' ? env : "/opt/devmesh/torch-venv";
  const std::string python = venv + "/bin/python";
  if (access(python.c_str(), X_OK) != 0) {
    return absl::StrCat("no torch peer: ", python,
                        " is missing (run tools/install_torch.sh)");
  }
  // The script goes through a file, so no shell quoting is involved.
  char path[] = "/tmp/devmesh_torch_store_XXXXXX.py";
  const int fd = mkstemps(path, 3);
  if (fd < 0) return std::string("no torch peer: cannot write its script");
  (void)!write(fd, kTorchHost, sizeof(kTorchHost) - 1);
  close(fd);
  FILE* out =
      popen(absl::StrCat("exec '", python, "' ", path).c_str(), "r");
  if (out == nullptr) return std::string("no torch peer: popen failed");
  char line[256] = {0};
  const bool got = fgets(line, sizeof(line), out) != nullptr;
  unlink(path);
  std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(line), ' ');
  if (!got || words.size() != 4 || !absl::SimpleAtoi(words[1], &torch_port) ||
      !absl::SimpleAtoi(words[3], &torch_pid)) {
    pclose(out);
    return absl::StrCat("no torch peer: its host printed '", line, "'");
  }
  // The pipe stays open (the host never writes again); StopPeers ends it.
  return std::string();
}

}  // namespace

const char* ServerName(Peer peer) {
  return peer == Peer::kTorch ? "torch" : "devmesh";
}
const char* ProtocolName(Peer peer) {
  return peer == Peer::kDevmesh ? "devmesh" : "c10d";
}

absl::StatusOr<std::string> StartPeers() {
  TcpStoreServerOptions options;
  options.host = "127.0.0.1";
  auto server = TcpStoreServer::Start(options);
  if (!server.ok()) return server.status();
  devmesh_server = server->release();  // lives as long as the process
  return StartTorch();
}

bool HasTorchPeer() { return torch_pid > 0; }

void StopPeers() {
  if (torch_pid > 0) kill(torch_pid, SIGTERM);
  torch_pid = -1;
}

absl::StatusOr<std::unique_ptr<Store>> NewStoreClient(Peer peer) {
  if (peer == Peer::kDevmesh) {
    TcpStoreClientOptions options;
    options.port = devmesh_server->port();
    options.connect_timeout = absl::Seconds(60);
    options.default_timeout = absl::Seconds(120);
    auto c = TcpStoreClient::Connect(options);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Store>(*std::move(c));
  }
  C10dStoreClientOptions options;
  options.port = peer == Peer::kTorch ? torch_port : devmesh_server->port();
  options.connect_timeout = absl::Seconds(60);
  options.default_timeout = absl::Seconds(120);
  auto c = C10dStoreClient::Connect(options);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Store>(*std::move(c));
}

}  // namespace devmesh::bench
