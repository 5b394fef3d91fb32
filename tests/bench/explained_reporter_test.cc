// The display reporter of devmesh's Google Benchmark binaries: the DEBUG
// warning of Debian's libbenchmark becomes one explaining line, and console
// lines can leave the counters out.
#include "bench/explained_reporter.h"

#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "gtest/gtest.h"

namespace devmesh::bench {
namespace {

TEST(ExplainContextTest, ReplacesOnlyTheDebugWarning) {
  const std::string context =
      "Run on (2 X 2600 MHz CPU s)\n"
      "***WARNING*** Library was built as DEBUG. Timings may be affected.\n"
      "Load Average: 1.00\n";
  EXPECT_EQ(ExplainContext(context), std::string("Run on (2 X 2600 MHz CPU s)\n") +
                                         kDebugLibraryNote +
                                         "\nLoad Average: 1.00\n");
}

TEST(ExplainContextTest, LeavesOtherTextAlone) {
  EXPECT_EQ(ExplainContext(""), "");
  EXPECT_EQ(ExplainContext("a\nb"), "a\nb");
  EXPECT_EQ(ExplainContext("***WARNING*** CPU scaling is enabled\n"),
            "***WARNING*** CPU scaling is enabled\n");
}

TEST(ExplainedReporterTest, ContextAndConsoleLines) {
  ExplainedReporter reporter(/*drop_console_counters=*/true);
  std::ostringstream out, err;
  reporter.SetOutputStream(&out);
  reporter.SetErrorStream(&err);
  benchmark::BenchmarkReporter::Context context;
  // Context leaves this uninitialized (RunSpecifiedBenchmarks sets it); a
  // garbage width padded the console line to gigabytes in 4 of 20 runs.
  context.name_field_width = 10;
  ASSERT_TRUE(reporter.ReportContext(context));
  EXPECT_EQ(err.str().find("***WARNING*** Library was built as DEBUG"),
            std::string::npos);
  // Debian's library prints the warning, so the note must stand in for it.
  EXPECT_NE(err.str().find(kDebugLibraryNote), std::string::npos) << err.str();
  benchmark::BenchmarkReporter::Run run;
  run.run_name.function_name = "bm";
  run.iterations = 1;
  run.time_unit = benchmark::kMicrosecond;
  run.counters["busbw_GBps"] = benchmark::Counter(0.000243817);
  reporter.ReportRuns({run});
  EXPECT_NE(out.str().find("bm"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("busbw_GBps"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace devmesh::bench
