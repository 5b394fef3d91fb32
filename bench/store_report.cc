#include "bench/store_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/explained_reporter.h"
#include "bench/run_stats.h"

namespace devmesh::bench {
namespace {

std::string Number(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.6g", *v) : "null";
}

}  // namespace

StoreReport::StoreReport()
    : benchmark::ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Defaults
                                                       : OO_Tabular) {}

bool StoreReport::ReportContext(const Context& context) {
  std::ostream& real = GetErrorStream();
  std::ostringstream err;
  SetErrorStream(&err);
  const bool ok = benchmark::ConsoleReporter::ReportContext(context);
  SetErrorStream(&real);
  real << ExplainContext(err.str());
  return ok;
}

void StoreReport::ReportRuns(const std::vector<Run>& runs) {
  benchmark::ConsoleReporter::ReportRuns(runs);
  for (const Run& run : runs) {
    if (run.run_type != Run::RT_Iteration) continue;
    auto it = described_.find(run.run_name.function_name);
    if (it == described_.end()) continue;
    Row row{it->second, std::nullopt, std::nullopt};
    if (row.key.op != "rendezvous") {
      row.key.clients = static_cast<int>(run.threads);
      auto items = run.counters.find("items_per_second");
      if (!run.error_occurred && items != run.counters.end()) {
        row.ops_per_s = items->second.value;
      }
    } else if (!run.error_occurred) {
      row.seconds = run.GetAdjustedRealTime() /
                    benchmark::GetTimeUnitMultiplier(run.time_unit);
    }
    rows_.push_back(std::move(row));
  }
}

std::vector<StoreReport::Figure> StoreReport::Figures() const {
  std::vector<Figure> figures;
  std::map<std::tuple<std::string, int, int>, size_t> index;
  for (const Row& r : rows_) {
    const auto k = std::make_tuple(r.key.op, r.key.clients, r.key.value_bytes);
    auto [it, fresh] = index.emplace(k, figures.size());
    if (fresh) {
      figures.push_back({r.key.op, r.key.clients, r.key.value_bytes, {}});
    }
    figures[it->second].by_peer[r.key.server + "/" + r.key.protocol]
                               [r.key.round] =
        r.key.op == "rendezvous" ? r.seconds : r.ops_per_s;
  }
  return figures;
}

namespace {

// The values of the rounds that succeeded.
std::vector<double> Values(const std::map<int, std::optional<double>>& rounds) {
  std::vector<double> v;
  for (const auto& [round, value] : rounds) {
    if (value) v.push_back(*value);
  }
  return v;
}

std::optional<double> MedianOf(
    const std::map<int, std::optional<double>>* rounds) {
  if (rounds == nullptr) return std::nullopt;
  std::vector<double> v = Values(*rounds);
  if (v.empty()) return std::nullopt;
  return Median(std::move(v));
}

struct PairedRatio {
  double ratio = 0;
  double half_width = 0;
  int pairs = 0;
};

// a/b per round where both succeeded (and b > 0).
std::optional<PairedRatio> Paired(
    const std::map<int, std::optional<double>>* a,
    const std::map<int, std::optional<double>>* b) {
  if (a == nullptr || b == nullptr) return std::nullopt;
  std::vector<double> ratios;
  for (const auto& [round, value] : *a) {
    auto other = b->find(round);
    if (value && other != b->end() && other->second && *other->second > 0) {
      ratios.push_back(*value / *other->second);
    }
  }
  if (ratios.empty()) return std::nullopt;
  return PairedRatio{InterquartileMean(ratios), BootstrapHalfWidth95(ratios),
                     static_cast<int>(ratios.size())};
}

std::string RatioCell(const std::optional<PairedRatio>& r) {
  if (!r) return absl::StrFormat("%14s", "-");
  if (r->pairs < 2) {
    return absl::StrFormat("%14s", absl::StrFormat("%.2f", r->ratio));
  }
  return absl::StrFormat(
      "%14s", absl::StrFormat("%.2f+-%.2f", r->ratio, r->half_width));
}

// "slower" / "faster" when the ratio +- its half width is on one side of 1
// (for a rate; a time's ratio reads the other way), "~" otherwise.
// Fewer pairs than this give no verdict: a bootstrap of so few is too narrow.
constexpr int kVerdictPairs = 4;

const char* Verdict(const std::optional<PairedRatio>& r, bool rate) {
  if (!r || r->pairs < kVerdictPairs) return "-";
  const bool below = r->ratio + r->half_width < 1;
  const bool above = r->ratio - r->half_width > 1;
  if (below) return rate ? "slower" : "faster";
  if (above) return rate ? "faster" : "slower";
  return "~";
}

}  // namespace

void StoreReport::PrintPeerTable(bool with_torch) const {
  std::printf(
      "\n# store peers: ops/s (set, get, add; median of the rounds) or "
      "seconds (rendezvous, barrier form); ratios are devmesh/torch paired "
      "by round, interquartile mean +- 95%% bootstrap half width (ops/s: >1 "
      "= devmesh faster; seconds: <1 = devmesh faster); verdict: devmesh "
      "protocol, c10d protocol\n");
  if (!with_torch) std::printf("# torch columns empty: no torch peer\n");
  std::printf("%-10s %7s %6s %6s %11s %11s %11s %14s %14s  %s\n", "op",
              "clients", "bytes", "pairs", "dm/dm", "dm/c10d", "torch/c10d",
              "dm:torch", "c10d:torch", "verdict");
  for (const Figure& f : Figures()) {
    auto get = [&](const char* p) -> const Rounds* {
      auto it = f.by_peer.find(p);
      return it == f.by_peer.end() ? nullptr : &it->second;
    };
    const Rounds *dm = get("devmesh/devmesh"), *dc = get("devmesh/c10d"),
                 *tc = get("torch/c10d");
    const auto r_dm = Paired(dm, tc), r_dc = Paired(dc, tc);
    const bool rate = f.op != "rendezvous";
    const int pairs = r_dm ? r_dm->pairs : 0;
    auto cell = [](const std::optional<double>& v) {
      return v ? absl::StrFormat("%11.4g", *v) : absl::StrFormat("%11s", "-");
    };
    std::printf("%-10s %7d %6d %6d %s %s %s %s %s  %s,%s\n", f.op.c_str(),
                f.clients, f.value_bytes, pairs, cell(MedianOf(dm)).c_str(),
                cell(MedianOf(dc)).c_str(), cell(MedianOf(tc)).c_str(),
                RatioCell(r_dm).c_str(), RatioCell(r_dc).c_str(),
                Verdict(r_dm, rate), Verdict(r_dc, rate));
  }
}

absl::Status StoreReport::WriteJson(const std::string& path) const {
  std::string json = "{\"rows\":[";
  bool first = true;
  for (const Figure& f : Figures()) {
    const bool rate = f.op != "rendezvous";
    for (const auto& [peer, rounds] : f.by_peer) {
      const size_t slash = peer.find('/');
      std::vector<double> values = Values(rounds);
      std::optional<double> median;
      if (!values.empty()) median = Median(values);
      // Every round from 0 to the last, null where there is none, so that
      // runs[i] of two servers are always round i of both.
      std::string runs;
      const int last = rounds.empty() ? -1 : rounds.rbegin()->first;
      for (int round = 0; round <= last; ++round) {
        auto it = rounds.find(round);
        absl::StrAppend(&runs, round ? "," : "",
                        Number(it == rounds.end() ? std::nullopt : it->second));
      }
      absl::StrAppend(
          &json, first ? "" : ",", "\n{\"op\":\"", f.op,
          "\",\"clients\":", f.clients, ",\"value_bytes\":", f.value_bytes,
          ",\"server\":\"", peer.substr(0, slash), "\",\"protocol\":\"",
          peer.substr(slash + 1), "\",\"ops_per_s\":",
          Number(rate ? median : std::nullopt),
          ",\"seconds\":", Number(rate ? std::nullopt : median),
          ",\"runs\":[", runs, "]}");
      first = false;
    }
  }
  json += "\n]}\n";
  std::ofstream out(path);
  out << json;
  out.close();
  if (!out) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace devmesh::bench
