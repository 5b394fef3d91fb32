#include "bench/store_peers.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/server_process.h"
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

std::unique_ptr<TcpStoreServer> devmesh_server;  // DevmeshServer::kThread
ServerProcess devmesh_process;                   // DevmeshServer::kProcess
int devmesh_port = 0;
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

absl::StatusOr<std::string> StartPeers(DevmeshServer where) {
  if (where == DevmeshServer::kProcess) {
    absl::StatusOr<ServerProcess> server = StartServerProcess();
    if (!server.ok()) {
      return absl::Status(server.status().code(),
                          absl::StrCat(server.status().message(),
                                       "; or pass --devmesh_server=thread"));
    }
    devmesh_process = *server;
    devmesh_port = server->port;
  } else {
    TcpStoreServerOptions options;
    options.host = "127.0.0.1";
    auto server = TcpStoreServer::Start(options);
    if (!server.ok()) return server.status();
    devmesh_server = *std::move(server);
    devmesh_port = devmesh_server->port();
  }
  return StartTorch();
}

bool HasTorchPeer() { return torch_pid > 0; }

absl::Status PinServers(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("no CPU to pin to");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  for (pid_t pid : {devmesh_process.pid, torch_pid}) {
    if (pid <= 0) continue;
    const std::string dir = absl::StrCat("/proc/", pid, "/task");
    DIR* tasks = opendir(dir.c_str());
    if (tasks == nullptr) return absl::InternalError("cannot list " + dir);
    while (dirent* e = readdir(tasks)) {
      pid_t tid = 0;
      if (!absl::SimpleAtoi(e->d_name, &tid)) continue;
      if (sched_setaffinity(tid, sizeof(set), &set) != 0) {
        closedir(tasks);
        return absl::InternalError(
            absl::StrCat("sched_setaffinity(", tid, "): ", strerror(errno)));
      }
    }
    closedir(tasks);
  }
  return absl::OkStatus();
}

void StopPeers() {
  if (torch_pid > 0) {
    kill(torch_pid, SIGTERM);
    waitpid(torch_pid, nullptr, 0);
  }
  torch_pid = -1;
  StopServerProcess(devmesh_process);
  devmesh_server.reset();
}

absl::StatusOr<std::unique_ptr<Store>> NewStoreClient(Peer peer) {
  return ConnectBenchClient("127.0.0.1",
                            peer == Peer::kTorch ? torch_port : devmesh_port,
                            peer != Peer::kDevmesh);
}

}  // namespace devmesh::bench
