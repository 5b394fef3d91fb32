// Set, Get and Add (of one counter) round trips per second, one thread, against a running etcd
// (EtcdStore) and a running devmesh store (TcpStoreClient, //store:server):
//
//   bazel run -c opt //tests/store:etcd_store_bench --
//       --etcd=127.0.0.1:2379 --tcp=127.0.0.1:29500 --ops=2000
// (one line)
//
// Either flag may be left out. Prints one table: store, op, ops/s, mean us.
//
// With --rendezvous_ranks=N it also times rendezvous (each rank connects,
// then runs Bootstrap::Create's peer exchange, ExchangePeerInfo) of N rank
// processes, with the Store calls per rank and, for etcd, the HTTP requests
// per rank (EtcdStore::requests), --rendezvous_runs times
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
#include "absl/strings/str_split.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/peer_info.h"
#include "store/forwarding_store.h"
#include "store/etcd_store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

ABSL_FLAG(std::string, etcd, "", "etcd client endpoint host:port");
ABSL_FLAG(std::string, tcp, "", "devmesh store server host:port");
ABSL_FLAG(int, ops, 2000, "round trips per op");
ABSL_FLAG(int, value_bytes, 64, "value size");
ABSL_FLAG(int, rendezvous_ranks, 0, "rank processes per rendezvous (0: none)");
ABSL_FLAG(int, rendezvous_runs, 5, "rendezvous per store");
ABSL_FLAG(int, add_guesses, devmesh::EtcdStoreOptions().add_guesses,
          "EtcdStoreOptions.add_guesses");

namespace devmesh {
namespace {

int Run(const char* name, Store& store) {
  const int ops = absl::GetFlag(FLAGS_ops);
  if (ops <= 0) return 0;  // --ops=0: the rendezvous only
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  for (const char* op : {"Set", "Get", "Add"}) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < ops; ++i) {
      const std::string key = absl::StrCat("bench/", i % 100);
      absl::Status st =
          op[0] == 'S'   ? store.Set(key, value)
          : op[0] == 'G' ? store.Get(key).status()
                         : store.Add("bench/counter", 1).status();
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

// Counts the Store calls made through it.
class CountingStore : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  int64_t calls = 0;
  absl::Status Set(absl::string_view k, absl::string_view v) override {
    ++calls;
    return ForwardingStore::Set(k, v);
  }
  absl::StatusOr<std::string> Get(absl::string_view k,
                                  absl::Duration t) override {
    ++calls;
    return ForwardingStore::Get(k, t);
  }
  absl::StatusOr<int64_t> Add(absl::string_view k, int64_t d) override {
    ++calls;
    return ForwardingStore::Add(k, d);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view k,
                                         absl::string_view e,
                                         absl::string_view d) override {
    ++calls;
    return ForwardingStore::CompareSet(k, e, d);
  }
  absl::Status Wait(absl::Span<const std::string> k,
                    absl::Duration t) override {
    ++calls;
    return ForwardingStore::Wait(k, t);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> k) override {
    ++calls;
    return ForwardingStore::Check(k);
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view k) override {
    ++calls;
    return ForwardingStore::DeleteKey(k);
  }
  absl::StatusOr<int64_t> NumKeys() override {
    ++calls;
    return ForwardingStore::NumKeys();
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> k, absl::Duration t) override {
    ++calls;
    return ForwardingStore::MultiGet(k, t);
  }
  absl::Status MultiSet(absl::Span<const std::string> k,
                        absl::Span<const std::string> v) override {
    ++calls;
    return ForwardingStore::MultiSet(k, v);
  }
};

struct RendezvousTimes {
  double seconds = -1;       // first fork to the last rank's return
  double calls = 0;          // Store calls per rank, mean
  double requests = 0;       // etcd's HTTP requests per rank, mean
};

// One rendezvous of `ranks` processes (connect, then the peer exchange of
// Bootstrap::Create) at store `address`; seconds -1 when a rank failed.
RendezvousTimes Rendezvous(const std::string& address, int ranks) {
  std::fflush(nullptr);
  RendezvousTimes out;
  int fds[2];
  if (pipe(fds) != 0) return out;
  const absl::Time start = absl::Now();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(fds[0]);
      RendezvousInfo info;
      info.rank = r;
      info.world_size = ranks;
      info.local_rank = r;
      info.local_world_size = ranks;
      absl::Status s = UseStoreAddress(address, info);
      std::shared_ptr<Store> base;
      if (s.ok() && !info.etcd_endpoints.empty()) {
        EtcdStoreOptions options;
        options.endpoints = info.etcd_endpoints;
        options.key_prefix = info.etcd_prefix;
        options.default_timeout = absl::Seconds(60);
        options.add_guesses = absl::GetFlag(FLAGS_add_guesses);
        auto etcd = EtcdStore::Connect(options);
        if (etcd.ok()) base = std::move(*etcd); else s = etcd.status();
      } else if (s.ok()) {
        TcpStoreClientOptions options;
        options.host = info.store_host;
        options.port = info.store_port;
        options.default_timeout = absl::Seconds(60);
        auto tcp = TcpStoreClient::Connect(options);
        if (tcp.ok()) base = std::move(*tcp); else s = tcp.status();
      }
      int64_t calls = 0, requests = 0;
      if (s.ok()) {
        auto* etcd = dynamic_cast<EtcdStore*>(base.get());
        const int64_t before = etcd != nullptr ? etcd->requests() : 0;
        CountingStore counting(base);
        PeerInfo self;
        self.rank = r;
        self.world_size = ranks;
        self.local_rank = r;
        self.local_world_size = ranks;
        self.pid = getpid();
        self.hostname = "bench";
        self.store = StoreAddressText(info);
        s = ExchangePeerInfo(counting, self, absl::Seconds(60)).status();
        calls = counting.calls;
        requests = etcd != nullptr ? etcd->requests() - before : 0;
      }
      if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
      const std::string line = absl::StrCat(calls, " ", requests, "\n");
      (void)!write(fds[1], line.data(), line.size());
      std::fflush(nullptr);
      _exit(s.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  close(fds[1]);
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (ok) out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) text.append(buf, n);
  close(fds[0]);
  int64_t calls = 0, requests = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    int64_t c = 0, q = 0;
    if (f.size() == 2 && absl::SimpleAtoi(f[0], &c) &&
        absl::SimpleAtoi(f[1], &q)) {
      calls += c;
      requests += q;
    }
  }
  out.calls = static_cast<double>(calls) / ranks;
  out.requests = static_cast<double>(requests) / ranks;
  return out;
}

void Report(const char* name, int ranks,
            const std::vector<RendezvousTimes>& runs) {
  std::vector<double> times;
  double calls = 0, requests = 0;
  for (const RendezvousTimes& t : runs) {
    times.push_back(t.seconds);
    calls += t.calls / runs.size();
    requests += t.requests / runs.size();
  }
  std::sort(times.begin(), times.end());
  std::printf("rendezvous %-5s ranks=%d runs=%zu min=%.3fs median=%.3fs "
              "max=%.3fs store_calls_per_rank=%.1f etcd_requests_per_rank="
              "%.1f\n",
              name, ranks, times.size(), times.front(),
              times[times.size() / 2], times.back(), calls, requests);
}

int RendezvousBench() {
  const int ranks = absl::GetFlag(FLAGS_rendezvous_ranks);
  const int runs = absl::GetFlag(FLAGS_rendezvous_runs);
  if (ranks <= 0 || runs <= 0) return 0;
  int rc = 0;
  if (const std::string etcd = absl::GetFlag(FLAGS_etcd); !etcd.empty()) {
    std::vector<RendezvousTimes> times;
    for (int run = 0; run < runs; ++run) {
      const RendezvousTimes t = Rendezvous(
          absl::StrCat("etcd://", etcd, "/devmesh-bench/rdzv/", getpid(), "/",
                       run, "/"),
          ranks);
      if (t.seconds < 0) return 1;
      times.push_back(t);
    }
    Report("etcd", ranks, times);
  }
  std::vector<RendezvousTimes> times;
  for (int run = 0; run < runs; ++run) {
    TcpStoreServerOptions options;
    options.host = "127.0.0.1";
    auto server = TcpStoreServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
      return 1;
    }
    const RendezvousTimes t =
        Rendezvous(absl::StrCat("127.0.0.1:", (*server)->port()), ranks);
    if (t.seconds < 0) return 1;
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
    options.add_guesses = absl::GetFlag(FLAGS_add_guesses);
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
