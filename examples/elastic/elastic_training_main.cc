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
// Healing (--heal, under //bootstrap:launch --host_store --keep_going
// --spare_restarts=1): a live rank of the lost replica stays as a spare
// (DeviceMesh::JoinAsSpare on its runtime), the launcher starts the dead
// rank again as a spare (DEVMESH_SPARE=1), and from --grow_step on every
// member calls Grow along dp between steps until they are admitted; the
// state (parameters, step) goes from replica 0 to the new replica
// (BroadcastState), and every rank checks its final parameters against a
// fresh run with 3, 2, then 3 replicas:
//
//   bazel-bin/bootstrap/launch --nproc=6 --host_store --keep_going \
//       --spare_restarts=1 -- \
//       bazel-bin/examples/elastic/elastic_training_main --kill_rank=2 --heal
//
// For tools/recovery_bench.sh: --checkpoint_dir=D writes each rank's last
// kHistory steps to D/rank<r> after every step and, at start, resumes from
// the last step every rank has there (the relaunch baseline); --report_times
// prints "kill_ns=<unix ns>" before the kill and "first_step_ns=<unix ns>"
// when the first step after a recovery (or after a resume) completes.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
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
#include "device_mesh/spare_runtime.h"
#include "device_mesh/state_broadcast.h"
#include "examples/elastic/elastic_training.h"

ABSL_FLAG(int, tp, 2, "size of the tp (shard) dim; dp is world size / tp");
ABSL_FLAG(int64_t, steps, 24, "training steps");
ABSL_FLAG(int, kill_rank, -1, "the rank that SIGKILLs itself (-1: none)");
ABSL_FLAG(int64_t, kill_step, 10, "the step at whose start it does");
ABSL_FLAG(std::string, backend, "auto",
          "the groups' backend (auto: InitDeviceMesh(\"cpu\")'s default, "
          "shared memory inside a host, UCX across hosts; or ucx, shm)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "keep each rank's last steps in DIR/rank<r>; resume from there");
ABSL_FLAG(bool, report_times, false,
          "print kill_ns= and first_step_ns= lines (tools/recovery_bench.sh)");

ABSL_FLAG(bool, heal, false,
          "after a Shrink, grow back: removed ranks stay as spares, restarted "
          "ranks (DEVMESH_SPARE=1) join as spares, members call Grow from "
          "--grow_step on");
ABSL_FLAG(int64_t, grow_step, 12, "with --heal: the first step to Grow at");

namespace {

using devmesh::elastic_example::Point;

// What an admitted rank takes from replica 0: its shard's parameters, the
// steps done, and the replica counts so far (for the fresh run it checks
// against).
struct HealState {
  std::vector<float> params =
      std::vector<float>(devmesh::elastic_example::kShard);
  int64_t done = 0;
  int64_t replicas_at_start = 0;
  int64_t resumed = 0;
  int64_t replicas_after_shrink = 0;
};

absl::Status BroadcastHealState(const devmesh::DeviceMesh& mesh,
                                HealState& s) {
  const std::vector<devmesh::StateBuffer> buffers = {
      devmesh::StateBuffer::Of(absl::MakeSpan(s.params)),
      devmesh::StateBuffer::Of(absl::MakeSpan(&s.done, 1)),
      devmesh::StateBuffer::Of(absl::MakeSpan(&s.replicas_at_start, 1)),
      devmesh::StateBuffer::Of(absl::MakeSpan(&s.resumed, 1)),
      devmesh::StateBuffer::Of(absl::MakeSpan(&s.replicas_after_shrink, 1))};
  return devmesh::BroadcastState(mesh, "dp", buffers);
}

// Trains a grown mesh from `s` to the end and checks the parameters.
int FinishHealed(const devmesh::DeviceMesh& mesh, const HealState& s,
                 const std::string& how) {
  const int me = mesh.GetRank();
  devmesh::elastic_example::TrainOptions train;
  train.steps = absl::GetFlag(FLAGS_steps);
  train.pad = 1 << 16;
  train.start_step = s.done;
  train.start_params = s.params;
  auto result = devmesh::elastic_example::Train(mesh, train);
  if (!result.ok() || !result->recoveries.empty() ||
      !result->left_because.empty()) {
    std::fprintf(stderr, "rank %d: after the Grow: %s\n", me,
                 result.ok() ? result->last_error.c_str()
                             : result.status().ToString().c_str());
    return 1;
  }
  const int64_t replicas = *mesh.size("dp");
  const bool match =
      result->params ==
      devmesh::elastic_example::Reference(
          result->shards, result->shard, result->steps,
          {{0, s.replicas_at_start},
           {s.resumed, s.replicas_after_shrink},
           {s.done, replicas}});
  std::printf("rank %d: %s; trained %lld steps, epoch %lld, %lld replicas "
              "since step %lld; parameters [%s] %s\n",
              me, how.c_str(), static_cast<long long>(result->steps),
              static_cast<long long>(result->epoch),
              static_cast<long long>(replicas),
              static_cast<long long>(s.done),
              absl::StrJoin(result->params, ", ").c_str(),
              match ? "equal a fresh run's" : "DIFFER from a fresh run's");
  return match ? 0 : 1;
}

// A spare (restarted, or removed and staying): waits for a Grow, takes the
// state, trains to the end.
int RunSpare(std::shared_ptr<devmesh::MeshRuntime> runtime) {
  devmesh::SpareOptions spare;
  spare.timeout = absl::Seconds(120);
  auto joined = devmesh::DeviceMesh::JoinAsSpare(runtime, spare);
  if (!joined.ok()) {
    std::fprintf(stderr, "rank %d: as a spare: %s\n", runtime->rank(),
                 joined.status().ToString().c_str());
    return 1;
  }
  HealState s;
  if (absl::Status b = BroadcastHealState(joined->mesh, s); !b.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", runtime->rank(),
                 b.ToString().c_str());
    return 1;
  }
  return FinishHealed(joined->mesh, s,
                      absl::StrCat("admitted as a spare at step ", s.done,
                                   " (", joined->report.ToString(), ")"));
}

// A member after its Shrink: Grow between steps until the spares are
// admitted (at most 60 s), then the state goes to them.
int HealMember(devmesh::DeviceMesh mesh,
               const devmesh::elastic_example::TrainResult& before,
               int64_t replicas_at_start) {
  const int me = mesh.GetRank();
  HealState s;
  s.params = before.params;
  s.done = before.steps;
  s.replicas_at_start = replicas_at_start;
  s.resumed = before.recoveries.back().resumed_step;
  s.replicas_after_shrink = before.recoveries.back().replicas;
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  for (;;) {
    auto grown = mesh.Grow("dp");
    if (!grown.ok()) {
      std::fprintf(stderr, "rank %d: Grow: %s\n", me,
                   grown.status().ToString().c_str());
      return 1;
    }
    // Grown, or the same mesh, or (an admitted rank died in the Grow) the
    // mesh it shrank to: go on with it.
    mesh = grown->mesh;
    if (grown->report.grown) {
      if (absl::Status b = BroadcastHealState(mesh, s); !b.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", me, b.ToString().c_str());
        return 1;
      }
      return FinishHealed(mesh, s, absl::StrCat("grew at step ", s.done, " (",
                                                grown->report.ToString(),
                                                ")"));
    }
    if (absl::Now() >= give_up) break;
    if (s.done + 1 >= steps) {
      absl::SleepFor(absl::Milliseconds(50));  // steps left for after it
      continue;
    }
    devmesh::elastic_example::TrainOptions one;
    one.steps = s.done + 1;
    one.pad = 1 << 16;
    one.start_step = s.done;
    one.start_params = s.params;
    auto step = devmesh::elastic_example::Train(mesh, one);
    if (!step.ok() || !step->recoveries.empty()) {
      std::fprintf(stderr, "rank %d: a step between Grows failed\n", me);
      return 1;
    }
    s.params = step->params;
    s.done = step->steps;
  }
  std::fprintf(stderr, "rank %d: no spare was admitted within 60 s\n", me);
  return 1;
}

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
  if (devmesh::StartedAsSpare()) {
    auto runtime = devmesh::SpareRuntimeFromEnv();
    if (!runtime.ok()) {
      std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
      return 1;
    }
    return RunSpare(*runtime);
  }
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
  const bool heal = absl::GetFlag(FLAGS_heal);
  if (heal) train.steps = std::min(train.steps, absl::GetFlag(FLAGS_grow_step));
  auto result = devmesh::elastic_example::Train(*mesh, train, hook);
  if (heal && result.ok()) {
    if (result->left_info.removed_in_epoch > 0) {
      std::printf("rank %d: removed at step %lld; staying as a spare\n", me,
                  static_cast<long long>(result->steps));
      std::fflush(stdout);
      return RunSpare(mesh->runtime());
    }
    if (result->left_because.empty() && !result->recoveries.empty() &&
        result->mesh.has_value()) {
      return HealMember(*result->mesh, *result, replicas);
    }
    if (result->left_because.empty() && result->recoveries.empty()) {
      // No death: train on to the end.
      train.steps = absl::GetFlag(FLAGS_steps);
      train.start_step = result->steps;
      train.start_params = result->params;
      result = devmesh::elastic_example::Train(*mesh, train, hook);
    }
  }
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
