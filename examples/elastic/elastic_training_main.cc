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
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device_mesh/init_device_mesh.h"
#include "examples/elastic/elastic_training.h"

ABSL_FLAG(int, tp, 2, "size of the tp (shard) dim; dp is world size / tp");
ABSL_FLAG(int64_t, steps, 24, "training steps");
ABSL_FLAG(int, kill_rank, -1, "the rank that SIGKILLs itself (-1: none)");
ABSL_FLAG(int64_t, kill_step, 10, "the step at whose start it does");
ABSL_FLAG(std::string, backend, "gloo", "the groups' backend");

namespace {

using devmesh::elastic_example::Point;

int Run() {
  const char* world_env = std::getenv("WORLD_SIZE");
  const int world = world_env != nullptr ? std::atoi(world_env) : 1;
  const int tp = absl::GetFlag(FLAGS_tp);
  if (tp < 1 || world % tp != 0) {
    std::fprintf(stderr, "world size %d is not a multiple of --tp=%d\n", world,
                 tp);
    return 2;
  }
  devmesh::MeshOptions options;
  options.all.backend = absl::GetFlag(FLAGS_backend);
  options.all.timeout = absl::Seconds(60);
  auto mesh = devmesh::InitDeviceMesh("cpu", {world / tp, tp}, {"dp", "tp"},
                                      options);
  if (!mesh.ok()) {
    std::fprintf(stderr, "%s\n", mesh.status().ToString().c_str());
    return 1;
  }
  const int me = mesh->GetRank();
  devmesh::elastic_example::TrainOptions train;
  train.steps = absl::GetFlag(FLAGS_steps);
  train.pad = 1 << 16;
  auto hook = [&](Point p, int64_t step, int64_t epoch) {
    if (epoch == 0 && me == absl::GetFlag(FLAGS_kill_rank) &&
        step == absl::GetFlag(FLAGS_kill_step) &&
        p == Point::kBeforeShardAllReduce) {
      std::printf("rank %d: SIGKILL at step %lld\n", me,
                  static_cast<long long>(step));
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
  std::vector<std::pair<int64_t, int64_t>> schedule = {{0, world / tp}};
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
