#include "bench/rendezvous_client.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/server_process.h"
#include "store/store.h"
#include "store/tcp_store_server.h"

namespace devmesh::bench {
namespace {

constexpr size_t kThreadStack = 256 << 10;

struct Shared {
  const RendezvousClientArgs* args = nullptr;
  int port = 0;
  pthread_barrier_t start_line;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_error;  // guarded by mu
};

struct Client {
  Shared* shared = nullptr;
  int index = 0;
};

absl::Status Rendezvous(const RendezvousClientArgs& a, int port, int index) {
  absl::StatusOr<std::unique_ptr<Store>> c =
      ConnectBenchClient(a.host, port, a.c10d);
  if (!c.ok()) return c.status();
  Store& store = **c;
  if (absl::Status s = store.Set(absl::StrCat(a.prefix, index), "x");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> arrived = store.Add(a.prefix + "count", 1);
  if (!arrived.ok()) return arrived.status();
  if (*arrived == a.total) {
    if (absl::Status s = store.Set(a.prefix + "all", "1"); !s.ok()) return s;
  }
  return store.Wait({a.prefix + "all"}, absl::Seconds(120));
}

void* ClientThread(void* arg) {
  const Client& c = *static_cast<Client*>(arg);
  Shared& sh = *c.shared;
  pthread_barrier_wait(&sh.start_line);
  absl::Status s = Rendezvous(*sh.args, sh.port, c.index);
  if (!s.ok()) {
    sh.failures.fetch_add(1);
    std::lock_guard<std::mutex> lock(sh.mu);
    if (sh.first_error.empty()) {
      sh.first_error = absl::StrCat("client ", c.index, ": ", s.ToString());
    }
  }
  return nullptr;
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int RunRendezvousClients(const RendezvousClientArgs& args) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  Shared shared;
  shared.args = &args;
  shared.port = args.port;
  std::unique_ptr<TcpStoreServer> server;
  if (args.port == 0) {
    TcpStoreServerOptions options;
    options.host = args.bind;
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> s =
        TcpStoreServer::Start(options);
    if (!s.ok()) {
      Say(absl::StrCat("error ", s.status().ToString()));
      return 1;
    }
    server = *std::move(s);
    shared.port = server->port();
    Say(absl::StrCat("port ", shared.port));
  }
  pthread_barrier_init(&shared.start_line, nullptr,
                       static_cast<unsigned>(args.count + 1));
  std::vector<Client> clients(static_cast<size_t>(args.count));
  std::vector<pthread_t> threads(static_cast<size_t>(args.count));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kThreadStack);
  for (int i = 0; i < args.count; ++i) {
    Client& c = clients[static_cast<size_t>(i)];
    c.shared = &shared;
    c.index = args.first + i;
    if (pthread_create(&threads[static_cast<size_t>(i)], &attr, &ClientThread,
                       &c) != 0) {
      Say(absl::StrCat("error pthread_create failed after ", i, " threads"));
      _exit(1);  // the threads made so far are parked at the barrier
    }
  }
  pthread_attr_destroy(&attr);
  Say("ready");
  char line[64];
  if (std::fgets(line, sizeof(line), stdin) == nullptr) _exit(1);
  pthread_barrier_wait(&shared.start_line);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  pthread_barrier_destroy(&shared.start_line);
  Say(absl::StrCat("done ", shared.failures.load(), " ", shared.first_error));
  if (server != nullptr) {
    while (std::fgets(line, sizeof(line), stdin) != nullptr) {
    }
  }
  return 0;
}

}  // namespace devmesh::bench
