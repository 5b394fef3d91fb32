// bazel run -c opt //bench:store_ops [-- --json_out=PATH]
// TCP store throughput and rendezvous time (issue 3), with a peer column
// (issue 10): every figure is measured against three servers in one run
// (bench/store_peers.h): devmesh's server with devmesh's client, devmesh's
// server with the c10d client, and PyTorch's TCPStore (libuv server, hosted
// by a Python process from the torch venv; skipped with a note without it)
// with the c10d client. The closing table gives the devmesh/torch ratios.
//
// BM_StoreOp/<op>/bytes:<B>/<server>/<protocol>/threads:<clients>: ops/s
// (wall clock) of set, get and add with 1, 4, 16, 64 clients; every client is
// a thread with its own client. set/get use one key per client; add hits one
// shared counter. The c10d client's set is SET followed by a PING (so calls
// from one thread stay ordered across its pooled connections; PyTorch's own
// client sends SET without waiting), and its get is WAIT then GET, as
// PyTorch's client does.
//
// BM_Rendezvous/clients:N/by_counter:B/<server>/<protocol>: wall time for N
// clients (threads, created and parked beforehand) to connect, set their own
// key and wait until all N keys are set. by_counter:0 = every client Waits
// on the list of all N keys (O(N) bytes per client, O(N^2) in all; devmesh
// protocol only); by_counter:1 = every client also Adds 1 to a counter, the
// one that brings it to N sets an "all" key, and every client Waits on that
// one key (Bootstrap's start barrier; O(1) per client).
//
// --json_out=PATH writes {"rows":[{"op","clients","value_bytes","server",
// "protocol","ops_per_s","seconds"}]} (ops_per_s for set/get/add, seconds for
// rendezvous; null when that run failed), read by tools/peer_bench.sh.
#include <pthread.h>
#include <sys/resource.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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

void StoreOp(benchmark::State& state, OpKind op, int bytes, Peer peer) {
  const std::string value(static_cast<size_t>(bytes), 'v');
  absl::StatusOr<std::unique_ptr<Store>> client = NewStoreClient(peer);
  if (!client.ok()) {
    state.SkipWithError("connect failed");
    return;
  }
  Store& store = **client;
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

void Register(StoreReport& report) {
  std::vector<Peer> peers = {Peer::kDevmesh, Peer::kDevmeshC10d};
  if (HasTorchPeer()) peers.push_back(Peer::kTorch);
  for (OpKind op : {kSet, kGet, kAdd}) {
    for (int bytes : {64, 4096}) {
      if (op == kAdd && bytes == 4096) continue;  // add has no value
      for (Peer peer : peers) {
        const std::string name =
            absl::StrCat("BM_StoreOp/", OpName(op), "/bytes:", bytes, "/",
                         ServerName(peer), "/", ProtocolName(peer));
        report.Describe(name, {OpName(op), 0, op == kAdd ? 8 : bytes,
                               ServerName(peer), ProtocolName(peer)});
        benchmark::RegisterBenchmark(name.c_str(), StoreOp, op, bytes, peer)
            ->Threads(1)
            ->Threads(4)
            ->Threads(16)
            ->Threads(64)
            ->UseRealTime()
            ->MinTime(0.5);
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
  // --json_out=PATH is ours; the rest goes to Google Benchmark.
  std::string json_out;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--json_out=", 11) == 0) {
      json_out = argv[i] + 11;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  RaiseFdLimit();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  absl::StatusOr<std::string> note = StartPeers();
  if (!note.ok()) {
    std::fprintf(stderr, "store_ops: %s\n", note.status().ToString().c_str());
    return 1;
  }
  if (!note->empty()) std::printf("# %s\n", note->c_str());
  StoreReport report;
  Register(report);
  benchmark::RunSpecifiedBenchmarks(&report);
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
