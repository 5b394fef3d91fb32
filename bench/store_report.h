// devmesh/bench/store_report.h
// -----------------------------------------------------------------------------
// StoreReport: //bench:store_ops's reporter. Prints Google Benchmark's usual
// console lines, keeps one row per run (op, clients, value bytes, server,
// protocol, round, ops/s or seconds), and at the end prints the peer table
// and writes the figures as JSON.
//
// The peer table has a line per figure (op, clients, bytes): each server's
// median over its rounds, and for each devmesh column the devmesh/torch
// ratio paired by round: the interquartile mean of the per-round ratios
// +- the half width of its 95% bootstrap interval (bench/run_stats.h; no
// interval from a single round); "pairs" is how many rounds both ran. The
// last column marks a ratio whose ratio +- half width lies below 1
// ("slower": torch's server did better beyond the interval) or above 1
// ("faster"), for the devmesh protocol and then c10d; "~" otherwise, and
// "-" from fewer than 4 pairs.
//
// The JSON has one row per figure and server:
//   {"rows":[{"op":"set|get|add|rendezvous","clients":N,"value_bytes":B,
//             "server":"devmesh|torch","protocol":"devmesh|c10d",
//             "ops_per_s":X or null,"seconds":Y or null,
//             "runs":[figure of round 0, 1, ... (null: none)]}]}
// (ops_per_s, the median of the rounds' ops/s, for set/get/add; seconds for
// rendezvous; null when every run failed or the field does not apply).
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
  int round = 0;         // which round of the figure (0 for rendezvous)
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
  // Prints the runs' console lines and keeps a row per run described.
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
  // One figure's rounds, per "server/protocol": round -> value (absent or
  // nullopt: that run failed).
  using Rounds = std::map<int, std::optional<double>>;
  struct Figure {
    std::string op;
    int clients = 0;
    int value_bytes = 0;
    std::map<std::string, Rounds> by_peer;
  };
  // The figures in the order they were first measured.
  std::vector<Figure> Figures() const;

  std::map<std::string, StoreRowKey> described_;
  std::vector<Row> rows_;
};

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_STORE_REPORT_H_
