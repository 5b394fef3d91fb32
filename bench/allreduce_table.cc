#include "bench/allreduce_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace devmesh {

double AlgBandwidthGBps(int64_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

double AllReduceBusBandwidthGBps(int64_t bytes, int nranks, double seconds) {
  if (nranks <= 0) return 0;
  return AlgBandwidthGBps(bytes, seconds) * 2.0 * (nranks - 1) / nranks;
}

std::string FormatAllReduceTable(const std::string& title,
                                 const std::vector<AllReduceRow>& rows) {
  std::string out = absl::StrCat("# ", title, "\n");
  absl::StrAppendFormat(
      &out, "#%11s %11s %5s %5s %5s %5s %10s %8s %8s %7s %10s %8s %9s %6s\n", "size",
      "count", "dim", "nrank", "batch", "iters", "time", "algbw", "busbw", "#wrong", "raw time",
      "raw bus", "mesh/raw", "+-95%");
  absl::StrAppendFormat(
      &out, "#%11s %11s %5s %5s %5s %5s %10s %8s %8s %7s %10s %8s %9s %6s\n", "(B)",
      "(elts)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
      "busbw", "");
  for (const AllReduceRow& r : rows) {
    const double bus = AllReduceBusBandwidthGBps(r.bytes, r.group_size,
                                                 r.mesh_seconds);
    const double raw_bus =
        AllReduceBusBandwidthGBps(r.bytes, r.group_size, r.raw_seconds);
    absl::StrAppendFormat(
        &out, " %11d %11d %5s %5d %5d %5d %10.1f %8.3f %8.3f %7d %10.1f %8.3f %9.3f %6.3f\n",
        r.bytes, r.count, r.dim, r.group_size, r.batch, r.iters, r.mesh_seconds * 1e6,
        AlgBandwidthGBps(r.bytes, r.mesh_seconds), bus, r.wrong,
        r.raw_seconds * 1e6, raw_bus, r.paired_ratio, r.ratio_ci95);
  }
  return out;
}

}  // namespace devmesh
