// bazel run -c opt //bench:store_ops [-- --json_out=PATH --rounds=N
//     --op_seconds=S --devmesh_server=process|thread --client_cpus=LIST
//     --server_cpus=LIST]
// TCP store throughput and rendezvous time (issue 3), with a peer column
// (issue 10): every figure is measured against three servers in one run
// (bench/store_peers.h): devmesh's server with devmesh's client, devmesh's
// server with the c10d client, and PyTorch's TCPStore (libuv server, hosted
// by a Python process from the torch venv; skipped with a note without it)
// with the c10d client. The closing table gives the devmesh/torch ratios.
// Devmesh's server runs in a process of its own (//store:server), as torch's
// does; --devmesh_server=thread hosts it on a thread of the clients' process
// instead. --client_cpus / --server_cpus pin the client threads and every
// thread of the server processes to those CPUs (e.g. 0 and 1: each request
// crosses CPUs; 0 and 0: none does), to see what CPU placement does to a
// figure.
//
// BM_StoreOp/<op>/bytes:<B>/clients:<C>/round:<R>/<server>/<protocol>: ops/s
// (wall clock, at least S seconds, default 0.2) of set, get and add with 1,
// 4, 16, 64 clients; every client is a thread with its own client. set/get
// use one key per client; add hits one shared counter. Each figure is
// measured in N rounds (default 6): a round runs the three servers back to
// back, starting at the next server each round, and the table's ratio is the
// interquartile mean of the N per-round ratios with the half width of its 95%
// bootstrap interval (bench/run_stats.h, as allreduce_2d pairs its runs).
// The c10d client's set is SET followed by a PING (so calls from one thread
// stay ordered across its pooled connections; PyTorch's own client sends SET
// without waiting), and its get is WAIT then GET, as PyTorch's client does.
//
// BM_Rendezvous/clients:N/by_counter:B/<server>/<protocol>: wall time for N
// clients (threads, created and parked beforehand) to connect, set their own
// key and wait until all N keys are set. by_counter:0 = every client Waits
// on the list of all N keys (O(N) bytes per client, O(N^2) in all; devmesh
// protocol only); by_counter:1 = every client also Adds 1 to a counter, the
// one that brings it to N sets an "all" key, and every client Waits on that
// one key (Bootstrap's start barrier; O(1) per client). One round.
//
// --json_out=PATH writes one row per figure and server (store_report.h):
// {"rows":[{"op","clients","value_bytes","server","protocol","ops_per_s",
// "seconds","runs"}]} (ops_per_s, the median over rounds, for set/get/add;
// seconds for rendezvous; null when every run failed; runs: each round's
// figure in round order, null for a failed one), read by tools/peer_bench.sh.
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/store_peers.h"
#include "bench/store_report.h"
#include "benchmark/benchmark.h"

namespace devmesh::bench {
namespace {

enum OpKind { kSet = 0, kGet = 1, kAdd = 2 };
const char* OpName(OpKind op) {
  return op == kSet ? "set" : op == kGet ? "get" : "add";
}

constexpr int kMaxClients = 64;

// The op rows' clients: kMaxClients per peer, connected once before the first
// run (one at a time) and reused by every run, so that a run times the ops
// alone. (A fresh burst of connections per run would time connection set-up
// instead: torch's server takes seconds to accept one here, see the README.)
std::vector<std::unique_ptr<Store>> op_clients[std::size(kAllPeers)];

absl::Status ConnectOpClients(const std::vector<Peer>& peers) {
  for (Peer peer : peers) {
    auto& clients = op_clients[static_cast<int>(peer)];
    while (clients.size() < kMaxClients) {
      absl::StatusOr<std::unique_ptr<Store>> c = NewStoreClient(peer);
      if (!c.ok()) return c.status();
      clients.push_back(*std::move(c));
    }
  }
  return absl::OkStatus();
}

void StoreOp(benchmark::State& state, OpKind op, int bytes, Peer peer) {
  const std::string value(static_cast<size_t>(bytes), 'v');
  auto& clients = op_clients[static_cast<int>(peer)];
  if (state.thread_index() >= static_cast<int>(clients.size())) {
    state.SkipWithError("no connected client for this thread");
    return;
  }
  Store& store = *clients[state.thread_index()];
  const std::string key = absl::StrCat("bench/", state.thread_index());
  if (!store.Set(key, value).ok()) state.SkipWithError("set failed");
  for (auto _ : state) {
    bool ok = true;
    switch (op) {
      case kSet:
        ok = store.Set(key, value).ok();
        break;
      case kGet:
        ok = store.Get(key).ok();
        break;
      case kAdd:
        ok = store.Add("bench/counter", 1).ok();
        break;
    }
    if (!ok) {
      state.SkipWithError("store op failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void Rendezvous(benchmark::State& state, int n, bool by_counter, Peer peer) {
  static int round = 0;  // fresh keys for every iteration of every run
  for (auto _ : state) {
    const std::string prefix = absl::StrCat("rdv/", round++, "/");
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(prefix, i));
    std::mutex mu;
    int failures = 0;
    // Releases every client at once (one futex wake for all; a condition
    // variable would hand its mutex from thread to thread, 4096 times).
    pthread_barrier_t start_line;
    pthread_barrier_init(&start_line, nullptr, static_cast<unsigned>(n + 1));
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        pthread_barrier_wait(&start_line);
        absl::StatusOr<std::unique_ptr<Store>> c = NewStoreClient(peer);
        bool ok = c.ok() && (*c)->Set(keys[i], "x").ok();
        if (ok && by_counter) {
          absl::StatusOr<int64_t> arrived = (*c)->Add(prefix + "count", 1);
          ok = arrived.ok();
          if (ok && *arrived == n) ok = (*c)->Set(prefix + "all", "1").ok();
          ok = ok && (*c)->Wait({prefix + "all"}, absl::Seconds(60)).ok();
        } else if (ok) {
          ok = (*c)->Wait(keys, absl::Seconds(60)).ok();
        }
        if (!ok) {
          std::lock_guard<std::mutex> lock(mu);
          ++failures;
        }
      });
    }
    const absl::Time start = absl::Now();
    pthread_barrier_wait(&start_line);
    for (std::thread& t : threads) t.join();
    pthread_barrier_destroy(&start_line);
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
    if (failures > 0) state.SkipWithError("a rendezvous client failed");
  }
}

absl::Status Register(StoreReport& report, int rounds, double op_seconds) {
  std::vector<Peer> peers = {Peer::kDevmesh, Peer::kDevmeshC10d};
  if (HasTorchPeer()) peers.push_back(Peer::kTorch);
  if (absl::Status s = ConnectOpClients(peers); !s.ok()) return s;
  const int n_peers = static_cast<int>(peers.size());
  for (OpKind op : {kSet, kGet, kAdd}) {
    for (int bytes : {64, 4096}) {
      if (op == kAdd && bytes == 4096) continue;  // add has no value
      for (int clients : {1, 4, 16, kMaxClients}) {
        // Rounds of one run per server, back to back; each round starts at
        // the next server, so that no server always runs first or last.
        for (int round = 0; round < rounds; ++round) {
          for (int k = 0; k < n_peers; ++k) {
            const Peer peer = peers[(round + k) % n_peers];
            const std::string name = absl::StrCat(
                "BM_StoreOp/", OpName(op), "/bytes:", bytes,
                "/clients:", clients, "/round:", round, "/",
                ServerName(peer), "/", ProtocolName(peer));
            report.Describe(name, {OpName(op), clients, op == kAdd ? 8 : bytes,
                                   ServerName(peer), ProtocolName(peer),
                                   round});
            benchmark::RegisterBenchmark(name.c_str(), StoreOp, op, bytes,
                                         peer)
                ->Threads(clients)
                ->UseRealTime()
                ->MinTime(op_seconds);
          }
        }
      }
    }
  }
  for (int n : {256, 1024, 4096}) {
    for (int by_counter : {0, 1}) {
      for (Peer peer : peers) {
        // The O(N^2) list form only for devmesh's own protocol (issue 3's
        // figure); the peer comparison uses the barrier form.
        if (by_counter == 0 && peer != Peer::kDevmesh) continue;
        const std::string name =
            absl::StrCat("BM_Rendezvous/clients:", n, "/by_counter:",
                         by_counter, "/", ServerName(peer), "/",
                         ProtocolName(peer));
        if (by_counter == 1) {
          report.Describe(name, {"rendezvous", n, 0, ServerName(peer),
                                 ProtocolName(peer)});
        }
        // torch's server takes tens of seconds for a burst of connections
        // (see the README): one iteration there.
        benchmark::RegisterBenchmark(name.c_str(), Rendezvous, n,
                                     by_counter == 1, peer)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Iterations(peer == Peer::kTorch ? 1 : 3);
      }
    }
  }
  return absl::OkStatus();
}

// Each client (and the server's end of it) is a file descriptor.
void RaiseFdLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace
}  // namespace devmesh::bench

int main(int argc, char** argv) {
  using namespace devmesh::bench;
  // --json_out, --devmesh_server, --rounds and --op_seconds are ours; the rest goes to Google
  // Benchmark.
  std::string json_out;
  DevmeshServer where = DevmeshServer::kProcess;
  std::vector<int> client_cpus, server_cpus;
  int rounds = 6;
  double op_seconds = 0.2;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--json_out=", 11) == 0) {
      json_out = argv[i] + 11;
    } else if (std::strcmp(argv[i], "--devmesh_server=process") == 0) {
      where = DevmeshServer::kProcess;
    } else if (std::strcmp(argv[i], "--devmesh_server=thread") == 0) {
      where = DevmeshServer::kThread;
    } else if (std::strncmp(argv[i], "--devmesh_server", 16) == 0) {
      std::fprintf(stderr,
                   "store_ops: --devmesh_server is 'process' or 'thread'\n");
      return 2;
    } else if (std::strncmp(argv[i], "--client_cpus=", 14) == 0 ||
               std::strncmp(argv[i], "--server_cpus=", 14) == 0) {
      std::vector<int>& cpus = argv[i][2] == 'c' ? client_cpus : server_cpus;
      for (absl::string_view w : absl::StrSplit(argv[i] + 14, ',')) {
        int cpu = -1;
        if (!absl::SimpleAtoi(w, &cpu) || cpu < 0 || cpu >= CPU_SETSIZE) {
          std::fprintf(stderr, "store_ops: %s: CPUs are a list like 0,1\n",
                       argv[i]);
          return 2;
        }
        cpus.push_back(cpu);
      }
    } else if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      if (!absl::SimpleAtoi(argv[i] + 9, &rounds) || rounds < 1) {
        std::fprintf(stderr, "store_ops: --rounds needs a positive integer\n");
        return 2;
      }
    } else if (std::strncmp(argv[i], "--op_seconds=", 13) == 0) {
      if (!absl::SimpleAtod(argv[i] + 13, &op_seconds) || !(op_seconds > 0)) {
        std::fprintf(stderr,
                     "store_ops: --op_seconds needs a positive number\n");
        return 2;
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  RaiseFdLimit();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  absl::StatusOr<std::string> note = StartPeers(where);
  if (!note.ok()) {
    std::fprintf(stderr, "store_ops: %s\n", note.status().ToString().c_str());
    return 1;
  }
  if (!note->empty()) std::printf("# %s\n", note->c_str());
  if (where == DevmeshServer::kThread &&
      (!server_cpus.empty() || !client_cpus.empty())) {
    std::fprintf(stderr, "store_ops: --client_cpus and --server_cpus need "
                         "--devmesh_server=process (a server thread of this "
                         "process would run where its clients run)\n");
    StopPeers();
    return 2;
  }
  if (!server_cpus.empty()) {
    if (absl::Status s = PinServers(server_cpus); !s.ok()) {
      std::fprintf(stderr, "store_ops: --server_cpus: %s\n",
                   s.ToString().c_str());
      StopPeers();
      return 1;
    }
  }
  if (!client_cpus.empty()) {  // every client thread inherits it
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : client_cpus) CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "store_ops: --client_cpus: %s\n",
                   std::strerror(errno));
      StopPeers();
      return 1;
    }
  }
  StoreReport report;
  if (absl::Status s = Register(report, rounds, op_seconds); !s.ok()) {
    std::fprintf(stderr, "store_ops: connecting the clients: %s\n",
                 s.ToString().c_str());
    StopPeers();
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks(&report);
  for (auto& clients : op_clients) clients.clear();
  StopPeers();
  report.PrintPeerTable(note->empty());
  if (!json_out.empty()) {
    if (absl::Status s = report.WriteJson(json_out); !s.ok()) {
      std::fprintf(stderr, "store_ops: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  benchmark::Shutdown();
  return 0;
}
