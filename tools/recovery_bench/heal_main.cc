// devmesh/tools/recovery_bench/heal_main.cc
// devmesh's heal, timed for tools/recovery_bench.sh: the heal path of
// examples/elastic/elastic_training_main --heal (the same model, the same
// calls: Shrink, JoinAsSpare, Grow along "dp" between steps, BroadcastState
// of the parameters and the step), with two timestamps the example does not
// print:
//   spare_ready_ns=<unix ns>  on each spare, when its runtime is made and it
//                             calls DeviceMesh::JoinAsSpare (registers);
//   full_step_ns=<unix ns>    on every rank of the grown mesh, when its first
//                             step on it (with the broadcast state) is done.
// Heal time = the last full_step_ns - the last spare_ready_ns. Every rank
// checks its final parameters bit for bit against a fresh run with 3, 2,
// then 3 replicas and prints "equal a fresh run's" (exit 0) or "DIFFER".
//
//   bazel build -c opt //tools/recovery_bench:heal_main //bootstrap:launch
//   bazel-bin/bootstrap/launch --nproc=6 --host_store --keep_going \
//       --spare_restarts=1 -- bazel-bin/tools/recovery_bench/heal_main \
//       --kill_rank=2
//
// Rank --kill_rank SIGKILLs itself at the start of --kill_step (printing
// kill_ns=); the survivors Shrink to (2, 2); the live rank of the lost
// replica stays as a spare; the launcher starts the dead rank again as a
// spare (DEVMESH_SPARE=1); from --grow_step on, the members call Grow before
// every step until both spares are admitted.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/spare_runtime.h"
#include "device_mesh/state_broadcast.h"
#include "examples/elastic/elastic_training.h"

ABSL_FLAG(int, tp, 2, "size of the tp (shard) dim; dp is world size / tp");
ABSL_FLAG(int64_t, steps, 24, "training steps");
ABSL_FLAG(int, kill_rank, 2, "the rank that SIGKILLs itself");
ABSL_FLAG(int64_t, kill_step, 10, "the step at whose start it does");
ABSL_FLAG(int64_t, grow_step, 11,
          "the first step the members call Grow before (> --kill_step)");

namespace {

namespace ex = devmesh::elastic_example;

void PrintNow(const char* what) {
  std::printf("%s=%lld\n", what,
              static_cast<long long>(absl::GetCurrentTimeNanos()));
  std::fflush(stdout);
}

// What an admitted rank takes from replica 0 (as the example's HealState).
struct HealState {
  std::vector<float> params = std::vector<float>(ex::kShard);
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

// Trains the grown mesh from `s` to the end (full_step_ns after its first
// step) and checks the parameters.
int FinishHealed(const devmesh::DeviceMesh& mesh, const HealState& s) {
  const int me = mesh.GetRank();
  ex::TrainOptions train;
  train.steps = absl::GetFlag(FLAGS_steps);
  train.pad = 1 << 16;
  train.start_step = s.done;
  train.start_params = s.params;
  bool first = true;
  train.on_step_done = [&](int64_t, const std::vector<float>&) {
    if (first) PrintNow("full_step_ns");
    first = false;
  };
  auto result = ex::Train(mesh, train);
  if (!result.ok() || !result->recoveries.empty() ||
      !result->left_because.empty()) {
    std::fprintf(stderr, "rank %d: after the Grow: %s\n", me,
                 result.ok() ? result->last_error.c_str()
                             : result.status().ToString().c_str());
    return 1;
  }
  const bool match =
      result->params == ex::Reference(result->shards, result->shard,
                                      result->steps,
                                      {{0, s.replicas_at_start},
                                       {s.resumed, s.replicas_after_shrink},
                                       {s.done, *mesh.size("dp")}});
  std::printf("rank %d: healed at step %lld; parameters %s\n", me,
              static_cast<long long>(s.done),
              match ? "equal a fresh run's" : "DIFFER from a fresh run's");
  return match ? 0 : 1;
}

int RunSpare(std::shared_ptr<devmesh::MeshRuntime> runtime) {
  devmesh::SpareOptions spare;
  spare.timeout = absl::Seconds(120);
  PrintNow("spare_ready_ns");
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
  return FinishHealed(joined->mesh, s);
}

// A member after its Shrink: Grow before every step until the spares are
// admitted (at most 60 s), then the state goes to them.
int HealMember(devmesh::DeviceMesh mesh, const ex::TrainResult& before,
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
  while (absl::Now() < give_up) {
    auto grown = mesh.Grow("dp");
    if (!grown.ok()) {
      std::fprintf(stderr, "rank %d: Grow: %s\n", me,
                   grown.status().ToString().c_str());
      return 1;
    }
    mesh = grown->mesh;
    if (grown->report.grown) {
      if (absl::Status b = BroadcastHealState(mesh, s); !b.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", me, b.ToString().c_str());
        return 1;
      }
      return FinishHealed(mesh, s);
    }
    if (s.done + 1 >= steps) {
      absl::SleepFor(absl::Milliseconds(5));  // keep steps for after it
      continue;
    }
    ex::TrainOptions one;
    one.steps = s.done + 1;
    one.pad = 1 << 16;
    one.start_step = s.done;
    one.start_params = s.params;
    auto step = ex::Train(mesh, one);
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
  options.all.timeout = absl::Seconds(60);
  auto mesh = devmesh::InitDeviceMesh("cpu", {-1, absl::GetFlag(FLAGS_tp)},
                                      {"dp", "tp"}, options);
  if (!mesh.ok()) {
    std::fprintf(stderr, "%s\n", mesh.status().ToString().c_str());
    return 1;
  }
  const int64_t replicas = *mesh->size("dp");
  const int me = mesh->GetRank();
  ex::TrainOptions train;
  train.steps = std::min(absl::GetFlag(FLAGS_steps),
                         absl::GetFlag(FLAGS_grow_step));
  train.pad = 1 << 16;
  auto hook = [&](ex::Point p, int64_t step, int64_t epoch) {
    if (epoch == 0 && me == absl::GetFlag(FLAGS_kill_rank) &&
        step == absl::GetFlag(FLAGS_kill_step) &&
        p == ex::Point::kBeforeShardAllReduce) {
      PrintNow("kill_ns");
      raise(SIGKILL);
    }
  };
  auto result = ex::Train(*mesh, train, hook);
  if (!result.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", me,
                 result.status().ToString().c_str());
    return 1;
  }
  if (result->left_info.removed_in_epoch > 0) return RunSpare(mesh->runtime());
  if (result->left_because.empty() && !result->recoveries.empty() &&
      result->mesh.has_value()) {
    return HealMember(*result->mesh, *result, replicas);
  }
  std::fprintf(stderr, "rank %d: no Shrink before step %lld (%s)\n", me,
               static_cast<long long>(result->steps),
               result->left_because.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
