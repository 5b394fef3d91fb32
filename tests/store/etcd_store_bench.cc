// Set and Get round trips per second, one thread, against a running etcd
// (EtcdStore) and a running devmesh store (TcpStoreClient, //store:server):
//
//   bazel run -c opt //tests/store:etcd_store_bench --
//       --etcd=127.0.0.1:2379 --tcp=127.0.0.1:29500 --ops=2000
// (one line)
//
// Either flag may be left out. Prints one table: store, op, ops/s, mean us.
//
// With --rendezvous_ranks=N it also times rendezvous (Bootstrap::Create, the
// peer exchange of every rank) of N rank processes, --rendezvous_runs times
// each: over the etcd at --etcd (DEVMESH_STORE_ADDR=etcd://..., a fresh key
// prefix each run) and over a fresh devmesh TcpStoreServer (the server of
// //store:server) that this process hosts on 127.0.0.1. Prints the time from
// the fork of the first rank to the last rank's return: min, median, max.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/bootstrap.h"
#include "store/etcd_store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

ABSL_FLAG(std::string, etcd, "", "etcd client endpoint host:port");
ABSL_FLAG(std::string, tcp, "", "devmesh store server host:port");
ABSL_FLAG(int, ops, 2000, "round trips per op");
ABSL_FLAG(int, value_bytes, 64, "value size");
ABSL_FLAG(int, rendezvous_ranks, 0, "rank processes per rendezvous (0: none)");
ABSL_FLAG(int, rendezvous_runs, 5, "rendezvous per store");

namespace devmesh {
namespace {

int Run(const char* name, Store& store) {
  const int ops = absl::GetFlag(FLAGS_ops);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  for (const char* op : {"Set", "Get"}) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < ops; ++i) {
      const std::string key = absl::StrCat("bench/", i % 100);
      absl::Status st =
          op[0] == 'S' ? store.Set(key, value) : store.Get(key).status();
      if (!st.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", name, op, st.ToString().c_str());
        return 1;
      }
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    std::printf("%-6s %-4s %9.0f %9.1f\n", name, op, ops / seconds,
                seconds * 1e6 / ops);
  }
  return 0;
}

// One rendezvous of `ranks` processes at store `address`: seconds from the
// first fork to the last rank's return, or -1 when a rank failed.
double Rendezvous(const std::string& address, int ranks) {
  std::fflush(nullptr);
  const absl::Time start = absl::Now();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      RendezvousInfo info;
      info.rank = r;
      info.world_size = ranks;
      info.local_rank = r;
      info.local_world_size = ranks;
      absl::Status s = UseStoreAddress(address, info);
      BootstrapOptions options;
      options.host_server = false;
      options.timeout = absl::Seconds(60);
      options.shutdown_timeout = absl::Seconds(1);
      if (s.ok()) s = Bootstrap::Create(info, options).status();
      if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
      std::fflush(nullptr);
      _exit(s.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? absl::ToDoubleSeconds(absl::Now() - start) : -1;
}

void Report(const char* name, int ranks, std::vector<double> times) {
  std::sort(times.begin(), times.end());
  std::printf("rendezvous %-5s ranks=%d runs=%zu min=%.3fs median=%.3fs "
              "max=%.3fs\n",
              name, ranks, times.size(), times.front(),
              times[times.size() / 2], times.back());
}

int RendezvousBench() {
  const int ranks = absl::GetFlag(FLAGS_rendezvous_ranks);
  const int runs = absl::GetFlag(FLAGS_rendezvous_runs);
  if (ranks <= 0 || runs <= 0) return 0;
  int rc = 0;
  if (const std::string etcd = absl::GetFlag(FLAGS_etcd); !etcd.empty()) {
    std::vector<double> times;
    for (int run = 0; run < runs; ++run) {
      const double t = Rendezvous(
          absl::StrCat("etcd://", etcd, "/devmesh-bench/rdzv/", getpid(), "/",
                       run, "/"),
          ranks);
      if (t < 0) return 1;
      times.push_back(t);
    }
    Report("etcd", ranks, times);
  }
  std::vector<double> times;
  for (int run = 0; run < runs; ++run) {
    TcpStoreServerOptions options;
    options.host = "127.0.0.1";
    auto server = TcpStoreServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
      return 1;
    }
    const double t =
        Rendezvous(absl::StrCat("127.0.0.1:", (*server)->port()), ranks);
    if (t < 0) return 1;
    times.push_back(t);
  }
  Report("tcp", ranks, times);
  return rc;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("%-6s %-4s %9s %9s\n", "store", "op", "ops/s", "mean_us");
  int rc = 0;
  if (const std::string etcd = absl::GetFlag(FLAGS_etcd); !etcd.empty()) {
    devmesh::EtcdStoreOptions options;
    options.endpoints = {etcd};
    options.key_prefix = "/devmesh-bench/";
    auto store = devmesh::EtcdStore::Connect(options);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
    rc |= devmesh::Run("etcd", **store);
  }
  if (const std::string tcp = absl::GetFlag(FLAGS_tcp); !tcp.empty()) {
    devmesh::TcpStoreClientOptions options;
    const size_t colon = tcp.rfind(':');
    options.host = tcp.substr(0, colon);
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(tcp.substr(colon + 1), &options.port)) {
      std::fprintf(stderr, "--tcp: want host:port\n");
      return 2;
    }
    auto store = devmesh::TcpStoreClient::Connect(options);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
    rc |= devmesh::Run("tcp", **store);
  }
  rc |= devmesh::RendezvousBench();
  return rc;
}
