// devmesh/bench/store_report.h
// -----------------------------------------------------------------------------
// StoreReport: //bench:store_ops's reporter. Prints Google Benchmark's usual
// console lines, keeps one row per run (op, clients, value bytes, server,
// protocol, ops/s or seconds), and at the end prints the peer table (each
// figure for the three peers of bench/store_peers.h, with the devmesh/torch
// ratios) and writes the rows as JSON:
//   {"rows":[{"op":"set|get|add|rendezvous","clients":N,"value_bytes":B,
//             "server":"devmesh|torch","protocol":"devmesh|c10d",
//             "ops_per_s":X or null,"seconds":Y or null}]}
// (ops_per_s for set/get/add, seconds for rendezvous; null when the run
// failed or does not apply).
//
// Thread-safety: Google Benchmark calls it from the main thread only.
#ifndef DEVMESH_BENCH_STORE_REPORT_H_
#define DEVMESH_BENCH_STORE_REPORT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"

namespace devmesh::bench {

struct StoreRowKey {
  std::string op;  // "set", "get", "add", "rendezvous"
  int clients = 0;  // rendezvous: N; ops: filled from the run's threads
  int value_bytes = 0;
  std::string server;    // "devmesh" or "torch"
  std::string protocol;  // "devmesh" or "c10d"
};

class StoreReport : public benchmark::ConsoleReporter {
 public:
  // Colours only on a terminal.
  StoreReport();
  // Rows are kept only for benchmarks described here, by registered name.
  void Describe(const std::string& name, StoreRowKey key) {
    described_[name] = std::move(key);
  }
  // Google Benchmark's context block, with the DEBUG warning of Debian's
  // libbenchmark explained (bench/explained_reporter.h).
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;

  // The peer table on stdout; `with_torch` false: a note replaces the torch
  // columns' figures.
  void PrintPeerTable(bool with_torch) const;
  // Errors: Unavailable when `path` cannot be written.
  absl::Status WriteJson(const std::string& path) const;

 private:
  struct Row {
    StoreRowKey key;
    std::optional<double> ops_per_s;
    std::optional<double> seconds;
  };
  std::map<std::string, StoreRowKey> described_;
  std::vector<Row> rows_;
};

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_STORE_REPORT_H_
