#include "bench/explained_reporter.h"

#include <sstream>
#include <string>

namespace devmesh::bench {
namespace {

constexpr char kDebugWarning[] = "***WARNING*** Library was built as DEBUG.";

}  // namespace

std::string ExplainContext(const std::string& context) {
  std::string out;
  size_t start = 0;
  while (start < context.size()) {
    size_t end = context.find('\n', start);
    if (end == std::string::npos) end = context.size();
    const std::string line = context.substr(start, end - start);
    out += line.rfind(kDebugWarning, 0) == 0 ? kDebugLibraryNote : line;
    if (end < context.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

ExplainedReporter::ExplainedReporter(bool drop_console_counters)
    : inner_(benchmark::CreateDefaultDisplayReporter()),
      drop_counters_(drop_console_counters &&
                     dynamic_cast<benchmark::ConsoleReporter*>(inner_.get()) !=
                         nullptr) {}

bool ExplainedReporter::ReportContext(const Context& context) {
  // The inner reporter writes the context to its error stream; catch it there
  // and pass it on explained.
  std::ostringstream err;
  inner_->SetOutputStream(&GetOutputStream());
  inner_->SetErrorStream(&err);
  const bool ok = inner_->ReportContext(context);
  inner_->SetErrorStream(&GetErrorStream());
  GetErrorStream() << ExplainContext(err.str());
  return ok;
}

void ExplainedReporter::ReportRuns(const std::vector<Run>& runs) {
  if (!drop_counters_) {
    inner_->ReportRuns(runs);
    return;
  }
  std::vector<Run> plain = runs;
  for (Run& run : plain) run.counters.clear();
  inner_->ReportRuns(plain);
}

void ExplainedReporter::Finalize() { inner_->Finalize(); }

int RunBenchmarkMain(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ExplainedReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace devmesh::bench
