// devmesh/bench/explained_reporter.h
// -----------------------------------------------------------------------------
// ExplainedReporter: the display reporter of devmesh's Google Benchmark
// binaries. It wraps the reporter --benchmark_format asks for
// (benchmark::CreateDefaultDisplayReporter) and changes two things a user
// would misread:
//  - Debian's libbenchmark 1.7.1 is built without NDEBUG, so its context
//    block says "***WARNING*** Library was built as DEBUG. Timings may be
//    affected." about the library, not about devmesh's code. That line is
//    replaced by one that says so.
//  - With drop_console_counters, the console lines leave out the user
//    counters: Google Benchmark 1.7.1 always prints them with SI prefixes
//    ("busbw_GBps=243.817u"), and the binary prints its own table with units
//    afterwards. JSON and CSV output, on the console or in --benchmark_out
//    (a separate file reporter), keep every counter.
//
// Thread-safety: Google Benchmark calls it from the main thread only.
#ifndef DEVMESH_BENCH_EXPLAINED_REPORTER_H_
#define DEVMESH_BENCH_EXPLAINED_REPORTER_H_

#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace devmesh::bench {

// The line printed in place of libbenchmark's DEBUG warning.
inline constexpr char kDebugLibraryNote[] =
    "note: Debian's libbenchmark is built without NDEBUG (hence its "
    "\"built as DEBUG\" warning); devmesh's own code is built as bazel says "
    "(-c opt under bazel run)";

// `context` (what a reporter printed for the context) with libbenchmark's
// DEBUG warning line replaced by kDebugLibraryNote; the rest as it was.
std::string ExplainContext(const std::string& context);

class ExplainedReporter : public benchmark::BenchmarkReporter {
 public:
  explicit ExplainedReporter(bool drop_console_counters = false);

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  bool drop_counters_;  // set only when inner_ is a console reporter
};

// What BENCHMARK_MAIN() does, with an ExplainedReporter for display.
int RunBenchmarkMain(int argc, char** argv);

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_EXPLAINED_REPORTER_H_
