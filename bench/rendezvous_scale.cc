// bazel run -c opt //bench:rendezvous_scale [-- --clients=16384
//     --client_processes=6 --trials=3 --servers=standalone,rank0
//     --protocols=devmesh,c10d --addresses=per_process|one --json_out=PATH]
//
// A rendezvous of many store clients spread over several processes (issue
// 17): one process cannot hold them, since these machines allow 20,000 open
// files per process, and a store client and its server end are a file each.
// Every client is a thread of one of --client_processes processes, with its
// own connection; it connects, sets its own key, adds 1 to a counter, the
// client that brings the counter to --clients sets an "all" key, and every
// client waits for that key (the form of Bootstrap's start barrier). A trial
// times, on the driver's clock, from the moment every client thread is
// created and parked (each process has said "ready") until every process has
// said "done": connection set-up included, thread creation not.
//
// Servers:
//   standalone  //store:server in a process of its own (a data dependency),
//               started once and used by every trial, with fresh keys each
//               trial (as a store outside the ranks serves a job);
//   rank0       the first client process hosts the server on a thread, as
//               rank 0 hosts the job's store, and is itself a client (its
//               share of clients is capped so that its clients and the
//               server's ends fit its file limit). A fresh one each trial.
// Protocols: devmesh (TcpStoreClient) and c10d (C10dStoreClient, PyTorch's
// TCPStore protocol), against the same server.
// Addresses (--addresses): per_process (default) has client process p
// connect to 127.0.0.<2+p> (the server listens on 0.0.0.0), as clients on
// different hosts reach a server from different addresses; one has every
// client connect to 127.0.0.1, where the kernel's search for a free source
// port for 16384 connections to one address and port took 30% of the CPU
// (perf: __inet_check_established, __inet_hash_connect), a cost of putting
// every client on one machine, not of the store.
//
// Prints one line per (server, protocol): clients, processes, trials, the
// median / min / max seconds and the failed clients over all trials; with
// --json_out=PATH also {"rows":[{"server","protocol","clients","processes",
// "seconds":[per trial],"failures"}]}. Exit codes: 0 every trial ran, with no
// failed client; 1 otherwise (each failure printed); 2 bad flags.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/run_stats.h"
#include "bench/server_process.h"
#include "store/tcp_store_server.h"

ABSL_FLAG(int, clients, 16384, "store clients in the rendezvous");
ABSL_FLAG(int, client_processes, 6, "processes the clients are spread over");
ABSL_FLAG(int, trials, 3, "rendezvous per (server, protocol)");
ABSL_FLAG(std::string, servers, "standalone,rank0",
          "comma list of: standalone, rank0");
ABSL_FLAG(std::string, protocols, "devmesh,c10d",
          "comma list of: devmesh, c10d");
ABSL_FLAG(std::string, addresses, "per_process",
          "per_process: client process p connects to 127.0.0.<2+p> (the "
          "server listens on 0.0.0.0), as clients on different hosts reach "
          "a server from different addresses; one: every client connects "
          "to 127.0.0.1");
ABSL_FLAG(std::string, json_out, "", "write the rows as JSON here");
// The client processes' own flags (set by the driver).
ABSL_FLAG(bool, client_role, false, "internal: run as a client process");
ABSL_FLAG(int, port, 0, "internal: the server's port (0: host it)");
ABSL_FLAG(std::string, host, "127.0.0.1", "internal: the server's address");
ABSL_FLAG(std::string, bind, "127.0.0.1", "internal: the hosted server's bind");
ABSL_FLAG(std::string, protocol, "devmesh", "internal: devmesh or c10d");
ABSL_FLAG(int, first, 0, "internal: this process's first client index");
ABSL_FLAG(int, count, 0, "internal: clients in this process");
ABSL_FLAG(std::string, prefix, "", "internal: the trial's key prefix");

namespace devmesh::bench {
namespace {

constexpr size_t kThreadStack = 256 << 10;
// Files a process needs besides its clients (stdio, pipes, libuv's, the
// listener).
constexpr int kSpareFiles = 64;

int RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<int>(lim.rlim_cur);
}

// ---- client process --------------------------------------------------------

struct ClientArgs {
  std::string host;
  int port = 0;
  bool c10d = false;
  int index = 0;
  int total = 0;
  std::string prefix;
  pthread_barrier_t* start_line = nullptr;
  std::atomic<int>* failures = nullptr;
  std::string* first_error = nullptr;
  pthread_mutex_t* error_mu = nullptr;
};

absl::Status Rendezvous(const ClientArgs& a) {
  absl::StatusOr<std::unique_ptr<Store>> c = ConnectBenchClient(a.host, a.port, a.c10d);
  if (!c.ok()) return c.status();
  Store& store = **c;
  if (absl::Status s = store.Set(absl::StrCat(a.prefix, a.index), "x");
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
  const ClientArgs& a = *static_cast<ClientArgs*>(arg);
  pthread_barrier_wait(a.start_line);
  absl::Status s = Rendezvous(a);
  if (!s.ok()) {
    a.failures->fetch_add(1);
    pthread_mutex_lock(a.error_mu);
    if (a.first_error->empty()) {
      *a.first_error = absl::StrCat("client ", a.index, ": ", s.ToString());
    }
    pthread_mutex_unlock(a.error_mu);
  }
  return nullptr;
}

// Talks to the driver on stdin/stdout: "port N" (when hosting), "ready",
// then waits for "go"; "done F [first error]"; when hosting, keeps the
// server until stdin closes.
int ClientMain() {
  RaiseFileLimit();
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int port = absl::GetFlag(FLAGS_port);
  std::unique_ptr<TcpStoreServer> server;
  if (port == 0) {
    TcpStoreServerOptions options;
    options.host = absl::GetFlag(FLAGS_bind);
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> s =
        TcpStoreServer::Start(options);
    if (!s.ok()) {
      std::printf("error %s\n", s.status().ToString().c_str());
      return 1;
    }
    server = *std::move(s);
    port = server->port();
    std::printf("port %d\n", port);
    std::fflush(stdout);
  }
  const int count = absl::GetFlag(FLAGS_count);
  pthread_barrier_t start_line;
  pthread_barrier_init(&start_line, nullptr, static_cast<unsigned>(count + 1));
  std::atomic<int> failures{0};
  std::string first_error;
  pthread_mutex_t error_mu = PTHREAD_MUTEX_INITIALIZER;
  std::vector<ClientArgs> args(static_cast<size_t>(count));
  std::vector<pthread_t> threads(static_cast<size_t>(count));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kThreadStack);
  for (int i = 0; i < count; ++i) {
    ClientArgs& a = args[static_cast<size_t>(i)];
    a.host = absl::GetFlag(FLAGS_host);
    a.port = port;
    a.c10d = absl::GetFlag(FLAGS_protocol) == "c10d";
    a.index = absl::GetFlag(FLAGS_first) + i;
    a.total = absl::GetFlag(FLAGS_clients);
    a.prefix = absl::GetFlag(FLAGS_prefix);
    a.start_line = &start_line;
    a.failures = &failures;
    a.first_error = &first_error;
    a.error_mu = &error_mu;
    if (pthread_create(&threads[static_cast<size_t>(i)], &attr, &ClientThread,
                       &a) != 0) {
      std::printf("error pthread_create failed after %d threads\n", i);
      std::fflush(stdout);
      _exit(1);  // the created threads are parked at the barrier
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  char line[64];
  if (std::fgets(line, sizeof(line), stdin) == nullptr) _exit(1);
  pthread_barrier_wait(&start_line);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  pthread_barrier_destroy(&start_line);
  std::printf("done %d %s\n", failures.load(), first_error.c_str());
  std::fflush(stdout);
  if (server != nullptr) {
    while (std::fgets(line, sizeof(line), stdin) != nullptr) {
    }
  }
  return 0;
}

// ---- driver ----------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;  // its stdout
  int in = -1;          // its stdin
};

absl::StatusOr<Child> Spawn(const std::vector<std::string>& flags) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0) return absl::InternalError("pipe failed");
  if (pipe(from_child) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    return absl::InternalError("pipe failed");
  }
  std::vector<std::string> argv_s = {"/proc/self/exe", "--client_role"};
  argv_s.insert(argv_s.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) {
      close(fd);
    }
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  fcntl(to_child[1], F_SETFD, FD_CLOEXEC);
  fcntl(from_child[0], F_SETFD, FD_CLOEXEC);
  Child c;
  c.pid = pid;
  c.in = to_child[1];
  c.out = fdopen(from_child[0], "r");
  return c;
}

// The child's next line, without its newline ("" when it ended).
std::string ReadLine(Child& c) {
  char line[4096];
  if (c.out == nullptr || std::fgets(line, sizeof(line), c.out) == nullptr) {
    return std::string();
  }
  std::string s(line);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

void Reap(std::vector<Child>& children) {
  for (Child& c : children) {
    if (c.in >= 0) close(c.in);
    c.in = -1;
  }
  for (Child& c : children) {
    if (c.pid > 0) waitpid(c.pid, nullptr, 0);
    if (c.out != nullptr) fclose(c.out);
    c = Child{};
  }
}

struct Trial {
  double seconds = 0;
  int failures = 0;
};

// One rendezvous. `port` 0: the first process hosts the server.
absl::StatusOr<Trial> RunTrial(int port, const std::string& protocol,
                               const std::string& prefix, int clients,
                               int processes, int file_limit,
                               bool per_process) {
  // The clients' shares; a hosting first process takes at most what its
  // file limit leaves beside the server's ends of every connection.
  std::vector<int> share(static_cast<size_t>(processes), 0);
  int rest = clients;
  int first_cap = clients;
  if (port == 0) first_cap = std::max(0, file_limit - clients - kSpareFiles);
  share[0] = std::min(first_cap, clients / processes);
  rest -= share[0];
  for (int p = 1; p < processes; ++p) {
    share[static_cast<size_t>(p)] = rest / (processes - p);
    rest -= share[static_cast<size_t>(p)];
  }
  for (int p = 0; p < processes; ++p) {
    const int files = share[static_cast<size_t>(p)] +
                      (p == 0 && port == 0 ? clients : 0) + kSpareFiles;
    if (files > file_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client process ", p, " would need ", files,
          " open files; the limit is ", file_limit,
          ": raise --client_processes"));
    }
  }
  std::vector<Child> children;
  auto fail = [&](absl::Status s) {
    for (Child& c : children) {
      if (c.pid > 0) kill(c.pid, SIGKILL);
    }
    Reap(children);
    return s;
  };
  int first = 0;
  for (int p = 0; p < processes; ++p) {
    absl::StatusOr<Child> c = Spawn(
        {absl::StrCat("--port=", port), absl::StrCat("--protocol=", protocol),
         absl::StrCat("--first=", first),
         absl::StrCat("--count=", share[static_cast<size_t>(p)]),
         absl::StrCat("--clients=", clients),
         absl::StrCat("--prefix=", prefix),
         absl::StrCat("--host=127.0.0.", per_process ? 2 + p : 1),
         absl::StrCat("--bind=", per_process ? "0.0.0.0" : "127.0.0.1")});
    if (!c.ok()) return fail(c.status());
    children.push_back(*c);
    first += share[static_cast<size_t>(p)];
    if (port == 0) {  // the host says its port before the others start
      const std::string line = ReadLine(children.back());
      if (!absl::StartsWith(line, "port ") ||
          !absl::SimpleAtoi(line.substr(5), &port)) {
        return fail(absl::InternalError(
            absl::StrCat("the hosting process said '", line, "'")));
      }
    }
  }
  for (Child& c : children) {
    const std::string line = ReadLine(c);
    if (line != "ready") {
      return fail(absl::InternalError(
          absl::StrCat("a client process said '", line, "', not ready")));
    }
  }
  const absl::Time start = absl::Now();
  for (Child& c : children) (void)!write(c.in, "go\n", 3);
  Trial trial;
  for (Child& c : children) {
    const std::string line = ReadLine(c);
    int failed = 0;
    std::vector<std::string> words = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (words.size() < 2 || words[0] != "done" ||
        !absl::SimpleAtoi(words[1], &failed)) {
      return fail(absl::InternalError(
          absl::StrCat("a client process said '", line, "', not done")));
    }
    if (failed > 0) {
      std::fprintf(stderr, "rendezvous_scale: %d clients failed; %s\n",
                   failed, words.size() > 2 ? words[2].c_str() : "");
    }
    trial.failures += failed;
  }
  trial.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  Reap(children);
  return trial;
}

struct Row {
  std::string server, protocol;
  std::vector<double> seconds;
  int failures = 0;
  int errors = 0;
};

int DriverMain() {
  const int clients = absl::GetFlag(FLAGS_clients);
  const int processes = absl::GetFlag(FLAGS_client_processes);
  const int trials = absl::GetFlag(FLAGS_trials);
  if (clients < 1 || processes < 1 || processes > clients || trials < 1) {
    std::fprintf(stderr,
                 "rendezvous_scale: --clients, --client_processes (at most "
                 "--clients) and --trials must be positive\n");
    return 2;
  }
  std::vector<std::string> servers =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',');
  std::vector<std::string> protocols =
      absl::StrSplit(absl::GetFlag(FLAGS_protocols), ',');
  for (const std::string& s : servers) {
    if (s != "standalone" && s != "rank0") {
      std::fprintf(stderr, "rendezvous_scale: unknown server '%s'\n",
                   s.c_str());
      return 2;
    }
  }
  for (const std::string& p : protocols) {
    if (p != "devmesh" && p != "c10d") {
      std::fprintf(stderr, "rendezvous_scale: unknown protocol '%s'\n",
                   p.c_str());
      return 2;
    }
  }
  const std::string addresses = absl::GetFlag(FLAGS_addresses);
  if (addresses != "per_process" && addresses != "one") {
    std::fprintf(stderr,
                 "rendezvous_scale: --addresses is per_process or one\n");
    return 2;
  }
  const bool per_process = addresses == "per_process";
  if (per_process && processes > 250) {
    std::fprintf(stderr, "rendezvous_scale: at most 250 client processes "
                         "with --addresses=per_process\n");
    return 2;
  }
  const int file_limit = RaiseFileLimit();
  signal(SIGPIPE, SIG_IGN);
  std::vector<Row> rows;
  int round = 0;
  for (const std::string& server : servers) {
    ServerProcess standalone;
    if (server == "standalone") {
      absl::StatusOr<ServerProcess> s =
          StartServerProcess(per_process ? "0.0.0.0" : "127.0.0.1");
      if (!s.ok()) {
        std::fprintf(stderr, "rendezvous_scale: %s\n",
                     s.status().ToString().c_str());
        return 1;
      }
      standalone = *s;
    }
    for (const std::string& protocol : protocols) {
      Row row{server, protocol, {}, 0, 0};
      for (int t = 0; t < trials; ++t) {
        absl::StatusOr<Trial> trial =
            RunTrial(standalone.port, protocol, absl::StrCat("rdv/", round++, "/"),
                     clients, processes, file_limit, per_process);
        if (!trial.ok()) {
          std::fprintf(stderr, "rendezvous_scale: %s/%s trial %d: %s\n",
                       server.c_str(), protocol.c_str(), t,
                       trial.status().ToString().c_str());
          ++row.errors;
          continue;
        }
        row.seconds.push_back(trial->seconds);
        row.failures += trial->failures;
      }
      rows.push_back(std::move(row));
    }
    StopServerProcess(standalone);
  }
  std::printf("# rendezvous of %d store clients over %d processes (%s): "
              "seconds from release to every client done (connect, set, add, "
              "wait)\n",
              clients, processes,
              per_process ? "each process to its own loopback address of the server"
                          : "every client to 127.0.0.1");
  std::printf("%-11s %-8s %7s %9s %6s %8s %8s %8s %8s\n", "server", "protocol",
              "clients", "processes", "trials", "median", "min", "max",
              "failed");
  bool ok = true;
  for (const Row& r : rows) {
    const auto [lo, hi] = r.seconds.empty()
                              ? std::make_pair(0.0, 0.0)
                              : std::make_pair(*std::min_element(
                                                   r.seconds.begin(),
                                                   r.seconds.end()),
                                               *std::max_element(
                                                   r.seconds.begin(),
                                                   r.seconds.end()));
    std::printf("%-11s %-8s %7d %9d %6zu %8.3f %8.3f %8.3f %8d\n",
                r.server.c_str(), r.protocol.c_str(), clients, processes,
                r.seconds.size(), Median(r.seconds), lo, hi, r.failures);
    ok = ok && r.failures == 0 && r.errors == 0;
  }
  const std::string json_out = absl::GetFlag(FLAGS_json_out);
  if (!json_out.empty()) {
    std::string json = "{\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::vector<std::string> secs;
      for (double s : r.seconds) secs.push_back(absl::StrFormat("%.6g", s));
      absl::StrAppend(&json, i ? "," : "", "\n{\"server\":\"", r.server,
                      "\",\"protocol\":\"", r.protocol, "\",\"clients\":",
                      clients, ",\"processes\":", processes, ",\"seconds\":[",
                      absl::StrJoin(secs, ","), "],\"failures\":", r.failures,
                      "}");
    }
    json += "\n]}\n";
    std::ofstream out(json_out);
    out << json;
    if (!out) {
      std::fprintf(stderr, "rendezvous_scale: cannot write %s\n",
                   json_out.c_str());
      return 1;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace devmesh::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_client_role)) return devmesh::bench::ClientMain();
  return devmesh::bench::DriverMain();
}
