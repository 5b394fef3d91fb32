#include "tests/store/etcd_testing.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/etcd_store.h"

namespace devmesh {
namespace testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

void Reap(pid_t pid) {
  kill(pid, SIGCONT);
  kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

EtcdCluster::~EtcdCluster() {
  for (Member& m : members_) {
    if (m.pid > 0) Reap(m.pid);
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status EtcdCluster::Start(int members) {
  if (access(kEtcd, X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kEtcd, " is missing: install etcd-server (tools/install.sh)"));
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/etcdXXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError("mkdtemp failed");
  }
  dir_ = templ;
  members_.resize(members);
  std::vector<std::string> initial;
  std::vector<int> taken;
  for (int i = 0; i < members; ++i) {
    for (int* port : {&members_[i].client_port, &members_[i].peer_port}) {
      *port = FreeLoopbackPort();
      if (*port == 0 ||
          std::find(taken.begin(), taken.end(), *port) != taken.end()) {
        return absl::InternalError("no free ports");
      }
      taken.push_back(*port);
    }
    initial.push_back(absl::StrCat("m", i, "=http://127.0.0.1:",
                                   members_[i].peer_port));
  }
  std::fflush(nullptr);
  for (int i = 0; i < members; ++i) {
    const std::string client =
        absl::StrCat("http://127.0.0.1:", members_[i].client_port);
    const std::string peer =
        absl::StrCat("http://127.0.0.1:", members_[i].peer_port);
    std::vector<std::string> args = {
        kEtcd,
        absl::StrCat("--name=m", i),
        absl::StrCat("--data-dir=", dir_, "/m", i),
        absl::StrCat("--listen-client-urls=", client),
        absl::StrCat("--advertise-client-urls=", client),
        absl::StrCat("--listen-peer-urls=", peer),
        absl::StrCat("--initial-advertise-peer-urls=", peer),
        absl::StrCat("--initial-cluster=", absl::StrJoin(initial, ",")),
        "--initial-cluster-state=new",
        // 3.4's default logger panics through a nil zap logger when a
        // linearizable read times out (etcd-io/etcd#17265, fixed in
        // 3.4.30; Debian ships 3.4.23).
        "--logger=zap",
    };
    const std::string log = absl::StrCat(dir_, "/m", i, ".log");
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      FILE* out = std::freopen(log.c_str(), "w", stdout);
      if (out != nullptr) dup2(fileno(stdout), 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(kEtcd, argv.data());
      _exit(127);
    }
    members_[i].pid = pid;
  }
  // Every member answers a write (so the cluster has a leader).
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int i = 0; i < members; ++i) {
    absl::Status last;
    for (;;) {
      EtcdStoreOptions options;
      options.endpoints = {endpoints()[i]};
      options.key_prefix = "/probe/";
      options.connect_timeout = absl::Seconds(1);
      options.default_timeout = absl::Seconds(2);
      absl::StatusOr<std::unique_ptr<EtcdStore>> store =
          EtcdStore::Connect(options);
      if (store.ok()) {
        last = (*store)->Set("up", "1");
        if (last.ok()) break;
      } else {
        last = store.status();
      }
      int status = 0;
      if (waitpid(members_[i].pid, &status, WNOHANG) == members_[i].pid) {
        members_[i].pid = 0;
        return absl::InternalError(absl::StrCat(
            "etcd member ", i, " exited at start; see ", dir_, "/m", i,
            ".log"));
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "etcd member ", i, " did not answer within 20 s: ",
            last.ToString()));
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& m : members_) {
    out.push_back(absl::StrCat("127.0.0.1:", m.client_port));
  }
  return out;
}

std::string EtcdCluster::Address(const std::string& prefix) const {
  return absl::StrCat("etcd://", absl::StrJoin(endpoints(), ","), prefix);
}

void EtcdCluster::Kill(int i) {
  if (members_[i].pid <= 0) return;
  kill(members_[i].pid, SIGKILL);
  int status = 0;
  waitpid(members_[i].pid, &status, 0);
  members_[i].pid = 0;
}

namespace {

// Whether every thread of `pid` is stopped ('T' or 't' in its stat line):
// kill(SIGSTOP) returns before a multi-threaded process's threads all
// stop, and one still running could answer a request sent right after.
bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  bool any = false;
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    std::FILE* f = std::fopen((entry.path() / "stat").c_str(), "r");
    if (f == nullptr) continue;  // a thread that just ended
    char line[512] = {0};
    const size_t n = std::fread(line, 1, sizeof(line) - 1, f);
    std::fclose(f);
    const char* paren = std::strrchr(line, ')');
    if (n == 0 || paren == nullptr || paren[1] == '\0') return false;
    if (paren[2] != 'T' && paren[2] != 't') return false;
    any = true;
  }
  return any && !ec;
}

}  // namespace

void EtcdCluster::Stop(int i) {
  if (members_[i].pid <= 0) return;
  kill(members_[i].pid, SIGSTOP);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (!AllThreadsStopped(members_[i].pid) && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void EtcdCluster::Continue(int i) {
  if (members_[i].pid > 0) kill(members_[i].pid, SIGCONT);
}

}  // namespace testing
}  // namespace devmesh
