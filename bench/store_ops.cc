// bazel run -c opt //bench:store_ops
// TCP store throughput and rendezvous time (issue 3, "Benchmark").
//
// BM_StoreOp/<op>/<value bytes>/threads:<clients>: ops/s (items_per_second,
// wall clock) of set, get and add with 1, 4, 16, 64 clients; every client is
// a thread with its own TcpStoreClient, against one in-process server on
// loopback. set/get use one key per client; add hits one shared counter.
//
// BM_Rendezvous/clients:N/by_counter:B: wall time for N clients (threads,
// created and parked beforehand) to connect, set their own key and wait until
// all N keys are set. by_counter:0 = every client Waits on the list of all N
// keys (O(N) bytes per client, O(N^2) in all); by_counter:1 = every client
// also Adds 1 to a counter, the one that brings it to N sets an "all" key,
// and every client Waits on that one key (what Bootstrap's start barrier
// does; O(1) per client).
#include <pthread.h>
#include <sys/resource.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "bootstrap/tcp_store_client.h"
#include "bootstrap/tcp_store_server.h"

namespace devmesh {
namespace {

enum OpKind { kSet = 0, kGet = 1, kAdd = 2 };

TcpStoreServer& Server() {
  static TcpStoreServer* server = [] {
    TcpStoreServerOptions options;
    options.host = "127.0.0.1";
    auto s = TcpStoreServer::Start(options);
    if (!s.ok()) {
      std::fprintf(stderr, "server: %s\n", s.status().ToString().c_str());
      std::abort();
    }
    return s->release();
  }();
  return *server;
}

std::unique_ptr<TcpStoreClient> NewClient() {
  TcpStoreClientOptions options;
  options.port = Server().port();
  options.connect_timeout = absl::Seconds(60);
  options.default_timeout = absl::Seconds(120);
  auto c = TcpStoreClient::Connect(options);
  if (!c.ok()) {
    std::fprintf(stderr, "client: %s\n", c.status().ToString().c_str());
    std::abort();
  }
  return std::move(*c);
}

void BM_StoreOp(benchmark::State& state) {
  const auto op = static_cast<OpKind>(state.range(0));
  const std::string value(static_cast<size_t>(state.range(1)), 'v');
  std::unique_ptr<TcpStoreClient> client = NewClient();
  const std::string key = absl::StrCat("bench/", state.thread_index());
  if (!client->Set(key, value).ok()) state.SkipWithError("set failed");
  for (auto _ : state) {
    bool ok = true;
    switch (op) {
      case kSet:
        ok = client->Set(key, value).ok();
        break;
      case kGet:
        ok = client->Get(key).ok();
        break;
      case kAdd:
        ok = client->Add("bench/counter", 1).ok();
        break;
    }
    if (!ok) {
      state.SkipWithError("store op failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void StoreOpArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"op(0=set,1=get,2=add)", "bytes"});
  for (int op : {kSet, kGet, kAdd}) {
    for (int bytes : {64, 4096}) {
      if (op == kAdd && bytes == 4096) continue;  // add has no value
      b->Args({op, bytes});
    }
  }
}
BENCHMARK(BM_StoreOp)
    ->Apply(StoreOpArgs)
    ->Threads(1)
    ->Threads(4)
    ->Threads(16)
    ->Threads(64)
    ->UseRealTime()
    ->MinTime(0.5);

void BM_Rendezvous(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool by_counter = state.range(1) == 1;
  int round = 0;
  for (auto _ : state) {
    const std::string prefix =
        absl::StrCat("rdv/", n, "/", by_counter, "/", round++, "/");
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
        TcpStoreClientOptions options;
        options.port = Server().port();
        options.connect_timeout = absl::Seconds(60);
        auto c = TcpStoreClient::Connect(options);
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
BENCHMARK(BM_Rendezvous)
    ->ArgNames({"clients", "by_counter"})
    ->ArgsProduct({{256, 1024, 4096}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Each client (and the server's end of it) is a file descriptor.
void RaiseFdLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  devmesh::RaiseFdLimit();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
