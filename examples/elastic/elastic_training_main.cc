// devmesh/examples/elastic/elastic_training_main.cc
// The elastic training example as a program: a (dp, tp) mesh over every rank
// of the job trains kSteps steps; with --kill_rank, that rank SIGKILLs itself
// at --kill_step, and the survivors Shrink and go on. Each rank prints one
// line: a survivor whether its parameters equal a fresh run's (exit 0 when
// they do), a live rank of the lost replica that it was removed (exit 0).
//
//   bazel build -c opt //examples/elastic:elastic_training_main //bootstrap:launch
//   bazel-bin/bootstrap/launch --nproc=6 --host_store --keep_going -- \
//       bazel-bin/examples/elastic/elastic_training_main --kill_rank=2
//
// --host_store: the launcher hosts the store, so that it outlives any rank;
// --keep_going: a dead rank does not stop the others (the launcher's exit
// code is still the dead rank's, 137).
//
// For tools/recovery_bench.sh: --checkpoint_dir=D writes each rank's last
// kHistory steps to D/rank<r> after every step and, at start, resumes from
// the last step every rank has there (the relaunch baseline); --report_times
// prints "kill_ns=<unix ns>" before the kill and "first_step_ns=<unix ns>"
// when the first step after a recovery (or after a resume) completes.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "device_mesh/init_device_mesh.h"
#include "examples/elastic/elastic_training.h"

ABSL_FLAG(int, tp, 2, "size of the tp (shard) dim; dp is world size / tp");
ABSL_FLAG(int64_t, steps, 24, "training steps");
ABSL_FLAG(int, kill_rank, -1, "the rank that SIGKILLs itself (-1: none)");
ABSL_FLAG(int64_t, kill_step, 10, "the step at whose start it does");
ABSL_FLAG(std::string, backend, "auto",
          "the groups' backend (auto: InitDeviceMesh(\"cpu\")'s default, "
          "shared memory inside a host, Gloo across hosts; or gloo, shm)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "keep each rank's last steps in DIR/rank<r>; resume from there");
ABSL_FLAG(bool, report_times, false,
          "print kill_ns= and first_step_ns= lines (tools/recovery_bench.sh)");

namespace {

using devmesh::elastic_example::Point;

// A rank's checkpoint: one line per kept step, "<step> <p0> <p1> ...".
using Checkpoint = std::map<int64_t, std::vector<float>>;

Checkpoint ReadCheckpoint(const std::string& path) {
  Checkpoint out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t step = 0;
    if (f.empty() || !absl::SimpleAtoi(f[0], &step)) continue;
    std::vector<float> p;
    for (size_t i = 1; i < f.size(); ++i) {
      float v = 0;
      if (absl::SimpleAtof(f[i], &v)) p.push_back(v);
    }
    out[step] = p;
  }
  return out;
}

// Written to a temporary file and renamed, so a kill never leaves half.
void WriteCheckpoint(const std::string& path, const Checkpoint& ckpt) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    for (const auto& [step, p] : ckpt) {
      out << step << " " << absl::StrJoin(p, " ") << "\n";
    }
  }
  std::rename(tmp.c_str(), path.c_str());
}

// The last step in every rank's checkpoint: the minimum over the mesh of
// each rank's newest (-1 when some rank has none).
absl::StatusOr<int64_t> CommonStep(const devmesh::DeviceMesh& mesh,
                                   const Checkpoint& ckpt) {
  int64_t step = ckpt.empty() ? -1 : ckpt.rbegin()->first;
  for (const char* dim : {"dp", "tp"}) {
    auto group = mesh.GetGroup(dim);
    if (!group.ok()) return group.status();
    absl::Status s = (*group)->AllReduce(&step, &step, 1,
                                         devmesh::DataType::kInt64,
                                         devmesh::ReduceOp::kMin);
    if (!s.ok()) return s;
  }
  return step;
}

int Run() {
  devmesh::MeshOptions options;
  options.all.backend = absl::GetFlag(FLAGS_backend);
  options.all.timeout = absl::Seconds(60);
  // dp = world size / tp, from whichever launcher started the job.
  auto mesh = devmesh::InitDeviceMesh("cpu", {-1, absl::GetFlag(FLAGS_tp)},
                                      {"dp", "tp"}, options);
  if (!mesh.ok()) {
    std::fprintf(stderr, "%s\n", mesh.status().ToString().c_str());
    return 1;
  }
  const int64_t replicas = *mesh->size("dp");
  const int me = mesh->GetRank();
  devmesh::elastic_example::TrainOptions train;
  train.steps = absl::GetFlag(FLAGS_steps);
  train.pad = 1 << 16;
  const bool times = absl::GetFlag(FLAGS_report_times);
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const std::string ckpt_path = absl::StrCat(dir, "/rank", me);
  Checkpoint ckpt;
  bool report_next = false;  // the next completed step is reported
  if (!dir.empty()) {
    ckpt = ReadCheckpoint(ckpt_path);
    auto step = CommonStep(*mesh, ckpt);
    if (!step.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", me, step.status().ToString().c_str());
      return 1;
    }
    if (*step >= 0 && ckpt.count(*step)) {
      train.start_step = *step;
      train.start_params = ckpt[*step];
      report_next = true;
      std::printf("rank %d: resumed from the checkpoint of step %lld\n", me,
                  static_cast<long long>(*step));
    }
  }
  train.on_step_done = [&](int64_t done, const std::vector<float>& params) {
    if (!dir.empty()) {
      ckpt[done] = params;
      while (ckpt.size() > static_cast<size_t>(devmesh::elastic_example::kHistory)) {
        ckpt.erase(ckpt.begin());
      }
      WriteCheckpoint(ckpt_path, ckpt);
    }
    if (times && report_next) {
      report_next = false;
      std::printf("first_step_ns=%lld\n",
                  static_cast<long long>(absl::GetCurrentTimeNanos()));
      std::fflush(stdout);
    }
  };
  auto hook = [&](Point p, int64_t step, int64_t epoch) {
    if (p == Point::kShrinkStart) report_next = true;
    if (epoch == 0 && me == absl::GetFlag(FLAGS_kill_rank) &&
        step == absl::GetFlag(FLAGS_kill_step) &&
        p == Point::kBeforeShardAllReduce) {
      std::printf("rank %d: SIGKILL at step %lld\n", me,
                  static_cast<long long>(step));
      if (times) {
        std::printf("kill_ns=%lld\n",
                    static_cast<long long>(absl::GetCurrentTimeNanos()));
      }
      std::fflush(stdout);
      raise(SIGKILL);
    }
  };
  auto result = devmesh::elastic_example::Train(*mesh, train, hook);
  if (!result.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", me,
                 result.status().ToString().c_str());
    return 1;
  }
  if (!result->left_because.empty()) {
    std::printf("rank %d: left the job at step %lld: %s\n", me,
                static_cast<long long>(result->steps),
                result->left_because.c_str());
    return 0;
  }
  std::vector<std::pair<int64_t, int64_t>> schedule = {{0, replicas}};
  std::string recovered;
  for (const auto& r : result->recoveries) {
    schedule.emplace_back(r.resumed_step, r.replicas);
    absl::StrAppend(&recovered, "; resumed at step ", r.resumed_step, " with ",
                    r.replicas, " replicas ",
                    absl::FormatDuration(r.resumed_at - r.failed_at),
                    " after the failed call (", r.report.ToString(), ")");
  }
  const bool match =
      result->params == devmesh::elastic_example::Reference(
                            result->shards, result->shard, result->steps,
                            schedule);
  std::printf("rank %d: trained %lld steps, epoch %lld%s; parameters [%s] %s\n",
              me, static_cast<long long>(result->steps),
              static_cast<long long>(result->epoch), recovered.c_str(),
              absl::StrJoin(result->params, ", ").c_str(),
              match ? "equal a fresh run's" : "DIFFER from a fresh run's");
  return match ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
