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
// "seconds":[per trial that ran],"failures","errors"}]} (failures: clients
// that failed; errors: trials that did not run to the end, each printed).
// Exit codes: 0 every trial ran, with no failed client; 1 otherwise; 2 bad
// values of the flags (unknown flags: absl's usage error, 1).
// The client processes are bench/rendezvous_client.h.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
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
#include "bench/rendezvous_client.h"
#include "bench/run_stats.h"
#include "bench/server_process.h"

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
ABSL_FLAG(std::string, bind, "127.0.0.1",
          "internal: the hosted server's bind address");
ABSL_FLAG(std::string, protocol, "devmesh", "internal: devmesh or c10d");
ABSL_FLAG(int, first, 0, "internal: this process's first client index");
ABSL_FLAG(int, count, 0, "internal: clients in this process");
ABSL_FLAG(std::string, prefix, "", "internal: the trial's key prefix");

namespace devmesh::bench {
namespace {

// Files a process needs besides its clients (stdio, pipes, libuv's, the
// listener).
constexpr int kSpareFiles = 64;
// How long a client process may take to say "ready" (thread creation) and
// "done" (the clients' own bounds are 60 s to connect and 120 s per call).
constexpr absl::Duration kReadyWithin = absl::Seconds(120);
constexpr absl::Duration kDoneWithin = absl::Seconds(400);

int RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<int>(lim.rlim_cur);
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // its stdout
  int in = -1;   // its stdin
  std::string buffered;  // read from `out`, not yet a whole line
};

absl::StatusOr<Child> Spawn(const std::vector<std::string>& flags) {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  if (pipe2(from_child, O_CLOEXEC) != 0) {
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
  if (pid < 0) {
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) {
      close(fd);
    }
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {  // dup2 clears close-on-exec on the copies
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  Child c;
  c.pid = pid;
  c.in = to_child[1];
  c.out = from_child[0];
  return c;
}

// The child's next line, without its newline; "" when it ended or said
// nothing before `deadline`.
std::string ReadLine(Child& c, absl::Time deadline) {
  while (c.buffered.find('\n') == std::string::npos) {
    pollfd p{c.out, POLLIN, 0};
    const int ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    if (poll(&p, 1, ms) <= 0) return std::string();
    char chunk[512];
    const ssize_t n = read(c.out, chunk, sizeof(chunk));
    if (n <= 0) return std::string();
    c.buffered.append(chunk, static_cast<size_t>(n));
  }
  const size_t nl = c.buffered.find('\n');
  std::string line = c.buffered.substr(0, nl);
  c.buffered.erase(0, nl + 1);
  return line;
}

// Closes the children's stdin (a hosting process then ends), waits for them
// and returns how many did not exit with status 0.
int Reap(std::vector<Child>& children) {
  for (Child& c : children) {
    if (c.in >= 0) close(c.in);
    c.in = -1;
  }
  int unclean = 0;
  for (Child& c : children) {
    int status = 0;
    if (c.pid > 0 && (waitpid(c.pid, &status, 0) != c.pid ||
                      !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
      ++unclean;
    }
    if (c.out >= 0) close(c.out);
    c = Child{};
  }
  return unclean;
}

struct Trial {
  double seconds = 0;
  int failures = 0;
};

// The clients' shares of `processes`; a hosting first process takes at most
// what its file limit leaves beside the server's ends of every connection.
// Errors: InvalidArgument when the clients do not fit.
absl::StatusOr<std::vector<int>> Shares(bool hosted, int clients,
                                        int processes, int file_limit) {
  std::vector<int> share(static_cast<size_t>(processes), 0);
  int rest = clients;
  const int first_cap =
      hosted ? std::max(0, file_limit - clients - kSpareFiles) : clients;
  if (hosted && first_cap == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a server hosted by a client process needs ", clients + kSpareFiles,
        " open files for ", clients, " clients; the limit is ", file_limit));
  }
  share[0] = std::min(first_cap, clients / processes);
  rest -= share[0];
  for (int p = 1; p < processes; ++p) {
    share[static_cast<size_t>(p)] = rest / (processes - p);
    rest -= share[static_cast<size_t>(p)];
  }
  for (int p = 0; p < processes; ++p) {
    const int files = share[static_cast<size_t>(p)] +
                      (p == 0 && hosted ? clients : 0) + kSpareFiles;
    if (files > file_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client process ", p, " would need ", files,
          " open files; the limit is ", file_limit,
          ": raise --client_processes"));
    }
  }
  if (rest != 0) {  // one hosting process cannot take them all
    return absl::InvalidArgumentError(absl::StrCat(
        rest, " of ", clients, " clients fit no process (the hosting one "
        "takes at most ", first_cap, "): raise --client_processes"));
  }
  return share;
}

// One rendezvous. `port` 0: the first process hosts the server.
absl::StatusOr<Trial> RunTrial(int port, const std::string& protocol,
                               const std::string& prefix, int clients,
                               int processes, int file_limit,
                               bool per_process) {
  absl::StatusOr<std::vector<int>> share =
      Shares(port == 0, clients, processes, file_limit);
  if (!share.ok()) return share.status();
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
         absl::StrCat("--count=", (*share)[static_cast<size_t>(p)]),
         absl::StrCat("--clients=", clients),
         absl::StrCat("--prefix=", prefix),
         absl::StrCat("--host=127.0.0.", per_process ? 2 + p : 1),
         absl::StrCat("--bind=", per_process ? "0.0.0.0" : "127.0.0.1")});
    if (!c.ok()) return fail(c.status());
    children.push_back(*c);
    first += (*share)[static_cast<size_t>(p)];
    if (port == 0) {  // the host says its port before the others start
      const std::string line =
          ReadLine(children.back(), absl::Now() + kReadyWithin);
      if (!absl::StartsWith(line, "port ") ||
          !absl::SimpleAtoi(line.substr(5), &port)) {
        return fail(absl::InternalError(
            absl::StrCat("the hosting process said '", line, "'")));
      }
    }
  }
  const absl::Time ready_by = absl::Now() + kReadyWithin;
  for (Child& c : children) {
    const std::string line = ReadLine(c, ready_by);
    if (line != "ready") {
      return fail(absl::InternalError(absl::StrCat(
          "a client process said '", line, "', not ready, within ",
          absl::FormatDuration(kReadyWithin))));
    }
  }
  const absl::Time start = absl::Now();
  for (Child& c : children) (void)!write(c.in, "go\n", 3);
  Trial trial;
  for (Child& c : children) {
    const std::string line = ReadLine(c, start + kDoneWithin);
    int failed = 0;
    std::vector<std::string> words =
        absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (words.size() < 2 || words[0] != "done" ||
        !absl::SimpleAtoi(words[1], &failed)) {
      return fail(absl::InternalError(absl::StrCat(
          "a client process said '", line, "', not done, within ",
          absl::FormatDuration(kDoneWithin))));
    }
    if (failed > 0) {
      std::fprintf(stderr, "rendezvous_scale: %d clients failed; %s\n",
                   failed, words.size() > 2 ? words[2].c_str() : "");
    }
    trial.failures += failed;
  }
  trial.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (const int unclean = Reap(children); unclean > 0) {
    return absl::InternalError(
        absl::StrCat(unclean, " client process(es) did not exit cleanly"));
  }
  return trial;
}

struct Row {
  std::string server, protocol;
  std::vector<double> seconds;
  int failures = 0;
  int errors = 0;
};

void PrintHeader(int clients, int processes, bool per_process) {
  std::printf("# rendezvous of %d store clients over %d processes (%s): "
              "seconds from release to every client done (connect, set, add, "
              "wait)\n",
              clients, processes,
              per_process ? "each process to its own loopback address of "
                            "the server"
                          : "every client to 127.0.0.1");
  std::printf("%-11s %-8s %7s %9s %6s %8s %8s %8s %8s %6s\n", "server",
              "protocol", "clients", "processes", "trials", "median", "min",
              "max", "failed", "errors");
  std::fflush(stdout);
}

void PrintRow(const Row& r, int clients, int processes) {
  auto cell = [&](double v) {
    return r.seconds.empty() ? std::string("       -")
                             : absl::StrFormat("%8.3f", v);
  };
  const double lo = r.seconds.empty()
                        ? 0
                        : *std::min_element(r.seconds.begin(), r.seconds.end());
  const double hi = r.seconds.empty()
                        ? 0
                        : *std::max_element(r.seconds.begin(), r.seconds.end());
  std::printf("%-11s %-8s %7d %9d %6zu %s %s %s %8d %6d\n", r.server.c_str(),
              r.protocol.c_str(), clients, processes, r.seconds.size(),
              cell(Median(r.seconds)).c_str(), cell(lo).c_str(),
              cell(hi).c_str(), r.failures, r.errors);
  std::fflush(stdout);
}

absl::Status WriteJson(const std::string& path, const std::vector<Row>& rows,
                       int clients, int processes) {
  std::string json = "{\"rows\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::vector<std::string> secs;
    for (double s : r.seconds) secs.push_back(absl::StrFormat("%.6g", s));
    absl::StrAppend(&json, i ? "," : "", "\n{\"server\":\"", r.server,
                    "\",\"protocol\":\"", r.protocol, "\",\"clients\":",
                    clients, ",\"processes\":", processes, ",\"seconds\":[",
                    absl::StrJoin(secs, ","), "],\"failures\":", r.failures,
                    ",\"errors\":", r.errors, "}");
  }
  json += "\n]}\n";
  std::ofstream out(path);
  out << json;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

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
  PrintHeader(clients, processes, per_process);
  std::vector<Row> rows;
  bool ok = true;
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
        absl::StatusOr<Trial> trial = RunTrial(
            standalone.port, protocol, absl::StrCat("rdv/", round++, "/"),
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
      PrintRow(row, clients, processes);
      ok = ok && row.failures == 0 && row.errors == 0;
      rows.push_back(std::move(row));
    }
    if (!StopServerProcess(standalone)) {
      std::fprintf(stderr, "rendezvous_scale: //store:server did not exit "
                           "cleanly on SIGTERM\n");
      ok = false;
    }
  }
  const std::string json_out = absl::GetFlag(FLAGS_json_out);
  if (!json_out.empty()) {
    if (absl::Status s = WriteJson(json_out, rows, clients, processes);
        !s.ok()) {
      std::fprintf(stderr, "rendezvous_scale: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace devmesh::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_client_role)) {
    devmesh::bench::RendezvousClientArgs a;
    a.host = absl::GetFlag(FLAGS_host);
    a.port = absl::GetFlag(FLAGS_port);
    a.bind = absl::GetFlag(FLAGS_bind);
    a.c10d = absl::GetFlag(FLAGS_protocol) == "c10d";
    a.first = absl::GetFlag(FLAGS_first);
    a.count = absl::GetFlag(FLAGS_count);
    a.total = absl::GetFlag(FLAGS_clients);
    a.prefix = absl::GetFlag(FLAGS_prefix);
    return devmesh::bench::RunRendezvousClients(a);
  }
  return devmesh::bench::DriverMain();
}
