#include "bench/store_report.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/explained_reporter.h"

namespace devmesh::bench {
namespace {

std::string Number(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.6g", *v) : "null";
}

std::string Cell(const std::optional<double>& v) {
  return v ? absl::StrFormat("%12.4g", *v) : absl::StrFormat("%12s", "-");
}

std::string Ratio(const std::optional<double>& a,
                  const std::optional<double>& b) {
  if (!a || !b || *b == 0) return absl::StrFormat("%9s", "-");
  return absl::StrFormat("%9.2f", *a / *b);
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

void StoreReport::PrintPeerTable(bool with_torch) const {
  // (op, clients, bytes) -> figure per (server, protocol).
  using Key = std::tuple<std::string, int, int>;
  std::map<Key, std::map<std::string, std::optional<double>>> table;
  std::vector<Key> order;
  for (const Row& r : rows_) {
    Key k{r.key.op, r.key.clients, r.key.value_bytes};
    if (!table.count(k)) order.push_back(k);
    table[k][r.key.server + "/" + r.key.protocol] =
        r.key.op == "rendezvous" ? r.seconds : r.ops_per_s;
  }
  std::printf(
      "\n# store peers: ops/s (set, get, add) or seconds (rendezvous, "
      "barrier form); ratios are devmesh/torch of that figure (ops/s: >1 = "
      "devmesh faster; seconds: <1 = devmesh faster)\n");
  if (!with_torch) std::printf("# torch columns empty: no torch peer\n");
  std::printf("%-10s %7s %6s %12s %12s %12s %9s %9s\n", "op", "clients",
              "bytes", "dm/dm", "dm/c10d", "torch/c10d", "dm:torch",
              "c10d:torch");
  for (const Key& k : order) {
    auto& f = table[k];
    auto get = [&](const char* p) {
      auto it = f.find(p);
      return it == f.end() ? std::optional<double>() : it->second;
    };
    const auto dm = get("devmesh/devmesh"), dc = get("devmesh/c10d"),
               tc = get("torch/c10d");
    std::printf("%-10s %7d %6d %s %s %s %s %s\n", std::get<0>(k).c_str(),
                std::get<1>(k), std::get<2>(k), Cell(dm).c_str(),
                Cell(dc).c_str(), Cell(tc).c_str(), Ratio(dm, tc).c_str(),
                Ratio(dc, tc).c_str());
  }
}

absl::Status StoreReport::WriteJson(const std::string& path) const {
  std::string json = "{\"rows\":[";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    absl::StrAppend(&json, i ? "," : "", "\n{\"op\":\"", r.key.op,
                    "\",\"clients\":", r.key.clients,
                    ",\"value_bytes\":", r.key.value_bytes, ",\"server\":\"",
                    r.key.server, "\",\"protocol\":\"", r.key.protocol,
                    "\",\"ops_per_s\":", Number(r.ops_per_s),
                    ",\"seconds\":", Number(r.seconds), "}");
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
