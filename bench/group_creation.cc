// bazel run //bench:group_creation [-- --nproc=8 --shapes=8,4x2,2x4,2x2x2]
//
// For each mesh shape: the time to create one world group (the baseline),
// then the time to create every per-dim group of the mesh (GetAllGroups:
// one Split of the world group per dim, none for a dim that is the whole
// world in world order), and per rank the number of Split calls, of world
// communicators and of store round trips that the groups cost, and how many
// of those round trips are the creation barrier that makes a group complete
// on every member before it returns anywhere (Gloo: 2 of the 6 per Split
// child; issue 11). Each shape is
// measured twice: as is, and with the last dim given its own timeout
// ("+t": one Split with options, still one world communicator). Times are
// the max over ranks. Starts --nproc local ranks with the //bootstrap launcher unless it
// runs under torchrun, Slurm or mpirun variables.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bootstrap/bootstrap.h"
#include "comm/gloo/gloo_communicator.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"

ABSL_FLAG(int, nproc, 8, "local ranks to launch");
ABSL_FLAG(std::string, shapes, "8,4x2,2x4,2x2x2",
          "comma-separated mesh shapes; each product must equal --nproc");
ABSL_FLAG(std::string, backend, "gloo", "gloo or nccl");
ABSL_FLAG(int, repeats, 3, "measurements per shape (the median is shown)");

namespace devmesh {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Sample {
  double world_s = 0;
  double groups_s = 0;
  int64_t splits = 0;
  int64_t round_trips = 0;
  int64_t worlds = 0;
  int64_t barrier_trips = 0;
};

// One measurement: a fresh runtime (its own store namespace, so the world
// group is really created), the world group, then every dim's group.
absl::StatusOr<Sample> Measure(Bootstrap& boot, std::shared_ptr<Store> store,
                               const std::vector<int64_t>& shape,
                               const std::string& backend, int index,
                               bool own_timeout) {
  auto ns = std::make_shared<PrefixStore>(store, absl::StrCat("gc/", index));
  auto runtime = MeshRuntime::Create(ns, boot.rank(), boot.world_size(),
                                     boot.local_rank());
  if (!runtime.ok()) return runtime.status();
  MeshOptions options;
  options.all.backend = backend;
  if (own_timeout) {
    options.per_dim[absl::StrCat("d", shape.size() - 1)].timeout =
        absl::Seconds(200);
  }
  const std::string device = backend == "nccl" ? "cuda" : "cpu";
  std::vector<std::string> names;
  for (size_t d = 0; d < shape.size(); ++d) names.push_back(absl::StrCat("d", d));
  auto mesh = InitDeviceMesh(*runtime, device, shape, names, options);
  if (!mesh.ok()) return mesh.status();
  if (absl::Status s = boot.Barrier(absl::StrCat("gc/a/", index)); !s.ok()) return s;
  Sample out;
  auto t0 = Clock::now();
  auto world = (*runtime)->World(backend, absl::Seconds(300));
  auto t1 = Clock::now();
  if (!world.ok()) return world.status();
  if (absl::Status s = boot.Barrier(absl::StrCat("gc/b/", index)); !s.ok()) return s;
  const int64_t trips_before = (*runtime)->store_round_trips();
  auto t2 = Clock::now();
  auto groups = mesh->GetAllGroups();
  auto t3 = Clock::now();
  if (!groups.ok()) return groups.status();
  out.world_s = Seconds(t0, t1);
  out.groups_s = Seconds(t2, t3);
  out.splits = (*runtime)->split_calls();
  out.round_trips = (*runtime)->store_round_trips() - trips_before;
  out.worlds = (*runtime)->world_communicators();
  // Barrier round trips of the groups made in this window (a dim that is
  // the world communicator was made before it).
  for (const auto& group : *groups) {
    auto* g = dynamic_cast<GlooCommunicator*>(group.get());
    if (g != nullptr && group != *world) {
      out.barrier_trips += g->barrier_round_trips();
    }
  }
  // Max over ranks, through a Gloo world group (host memory, whatever the
  // backend measured).
  auto metrics = (*runtime)->World("gloo", absl::Seconds(300));
  if (!metrics.ok()) return metrics.status();
  double times[2] = {out.world_s, out.groups_s};
  double max_times[2];
  absl::Status s = (*metrics)->AllReduce(times, max_times, 2,
                                         DataType::kFloat64, ReduceOp::kMax);
  if (!s.ok()) return s;
  int64_t counts[4] = {out.splits, out.round_trips, out.worlds,
                       out.barrier_trips};
  int64_t max_counts[4];
  s = (*metrics)->AllReduce(counts, max_counts, 4, DataType::kInt64,
                            ReduceOp::kMax);
  if (!s.ok()) return s;
  return Sample{max_times[0], max_times[1], max_counts[0], max_counts[1],
                max_counts[2], max_counts[3]};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunRank() {
  auto boot = Bootstrap::FromEnv();
  if (!boot.ok()) {
    std::fprintf(stderr, "group_creation: %s\n", boot.status().ToString().c_str());
    return 1;
  }
  const std::string backend = absl::GetFlag(FLAGS_backend);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::string table = absl::StrFormat(
      "# group creation, backend %s, %d ranks, median of %d\n"
      "#%-9s %12s %12s %8s %12s %12s %16s %18s\n",
      backend, (*boot)->world_size(), repeats, "shape", "world (ms)",
      "groups (ms)", "ratio", "splits/rank", "worlds/rank",
      "store trips/rank", "of which barrier");
  int index = 0;
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',')) {
    auto shape = ParseMeshShape(text);
    if (!shape.ok()) {
      std::fprintf(stderr, "group_creation: %s\n", shape.status().ToString().c_str());
      return 2;
    }
    for (bool own_timeout : {false, true}) {
    std::vector<double> world, groups;
    Sample last;
    for (int r = 0; r < repeats; ++r) {
      auto sample = Measure(**boot, (*boot)->store(), *shape, backend, index++,
                            own_timeout);
      if (!sample.ok()) {
        std::fprintf(stderr, "group_creation: shape %s: %s\n",
                     std::string(text).c_str(),
                     sample.status().ToString().c_str());
        return 1;
      }
      world.push_back(sample->world_s);
      groups.push_back(sample->groups_s);
      last = *sample;
    }
    const double w = Median(world), g = Median(groups);
    absl::StrAppendFormat(
        &table, " %-9s %12.2f %12.2f %8.2f %12d %12d %16d %18d\n",
        absl::StrCat(absl::StrJoin(*shape, "x"), own_timeout ? "+t" : ""),
        w * 1e3, g * 1e3, g / w, last.splits, last.worlds, last.round_trips,
        last.barrier_trips);
    }
  }
  if ((*boot)->rank() == 0) std::fputs(table.c_str(), stdout);
  return (*boot)->Barrier("gc/done").ok() ? 0 : 1;
}

// Checks the flags once, before launching (not once per rank).
absl::Status CheckFlags() {
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc < 1 || nproc > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc (", nproc, ") must be in [1, 4096]"));
  }
  if (absl::GetFlag(FLAGS_repeats) < 1) {
    return absl::InvalidArgumentError("--repeats must be at least 1");
  }
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',')) {
    auto shape = ParseMeshShape(text);
    if (!shape.ok()) return shape.status();
    int64_t size = 1;
    for (int64_t s : *shape) size = s > 4096 / size ? 4097 : size * s;
    if (size != nproc) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh shape ", text, " does not hold --nproc=", nproc, " ranks"));
    }
  }
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "gloo" && backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend must be gloo or nccl, not '", backend, "'"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  std::vector<std::string> original(argv, argv + argc);
  absl::ParseCommandLine(argc, argv);
  if (absl::Status s = devmesh::CheckFlags(); !s.ok()) {
    std::fprintf(stderr, "group_creation: %s\n", s.ToString().c_str());
    return 2;
  }
  if (devmesh::HasRendezvousEnv()) return devmesh::RunRank();
  devmesh::LaunchOptions launch;
  launch.nproc = absl::GetFlag(FLAGS_nproc);
  launch.argv = original;
  launch.argv[0] = "/proc/self/exe";
  auto code = devmesh::LaunchLocal(launch);
  if (!code.ok()) {
    std::fprintf(stderr, "group_creation: %s\n", code.status().ToString().c_str());
    return 1;
  }
  return *code;
}
