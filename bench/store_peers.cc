#include "bench/store_peers.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

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

std::unique_ptr<TcpStoreServer> devmesh_server;  // DevmeshServer::kThread
int devmesh_port = 0;
pid_t devmesh_pid = -1;  // DevmeshServer::kProcess
int torch_port = 0;
pid_t torch_pid = -1;

// //store:server, a data dependency of //bench:store_ops: in the runfiles
// tree (bazel run, or the binary run from bazel-bin), else beside this
// binary's package in bazel-bin.
std::string ServerBinary() {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("RUNFILES_DIR")) {
    candidates.push_back(absl::StrCat(dir, "/devmesh/store/server"));
  }
  char self[4096] = {0};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    const std::string exe(self, static_cast<size_t>(n));
    candidates.push_back(exe + ".runfiles/devmesh/store/server");
    const size_t slash = exe.rfind('/');
    candidates.push_back(exe.substr(0, slash) + "/../store/server");
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return std::string();
}

// Starts //store:server --port=0 --bind=127.0.0.1 in a child process that
// dies with this one, and reads its port from its "listening on" line.
absl::Status StartDevmeshProcess() {
  const std::string binary = ServerBinary();
  if (binary.empty()) {
    return absl::NotFoundError(
        "//store:server is not built next to store_ops (bazel build -c opt "
        "//bench:store_ops builds it), or pass --devmesh_server=thread");
  }
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(binary.c_str(), binary.c_str(), "--port=0", "--bind=127.0.0.1",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  devmesh_pid = pid;
  FILE* f = fdopen(out[0], "r");
  char line[256] = {0};
  const bool got = f != nullptr && fgets(line, sizeof(line), f) != nullptr;
  // The pipe stays open: the server's last line (at SIGTERM) has a reader.
  const char* colon = got ? std::strrchr(line, ':') : nullptr;
  if (colon == nullptr ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(colon + 1),
                        &devmesh_port)) {
    return absl::InternalError(
        absl::StrCat(binary, " did not print its address: '", line, "'"));
  }
  return absl::OkStatus();
}

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
    if (absl::Status s = StartDevmeshProcess(); !s.ok()) return s;
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
  for (pid_t pid : {devmesh_pid, torch_pid}) {
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
  for (pid_t* pid : {&torch_pid, &devmesh_pid}) {
    if (*pid > 0) {
      kill(*pid, SIGTERM);
      waitpid(*pid, nullptr, 0);
    }
    *pid = -1;
  }
  devmesh_server.reset();
}

absl::StatusOr<std::unique_ptr<Store>> NewStoreClient(Peer peer) {
  if (peer == Peer::kDevmesh) {
    TcpStoreClientOptions options;
    options.port = devmesh_port;
    options.connect_timeout = absl::Seconds(60);
    options.default_timeout = absl::Seconds(120);
    auto c = TcpStoreClient::Connect(options);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Store>(*std::move(c));
  }
  C10dStoreClientOptions options;
  options.port = peer == Peer::kTorch ? torch_port : devmesh_port;
  options.connect_timeout = absl::Seconds(60);
  options.default_timeout = absl::Seconds(120);
  auto c = C10dStoreClient::Connect(options);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Store>(*std::move(c));
}

}  // namespace devmesh::bench
