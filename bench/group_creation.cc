// bazel run //bench:group_creation [-- --nproc=8 --shapes=8,4x2,2x4,2x2x2]
//
// For each mesh shape: the time to create every per-dim group of the mesh
// (GetAllGroups: each rank creates only its own lines' groups, made from
// the layout; a dim that is the whole world in world order is the world
// communicator), then, as the baseline, the time to create one world group;
// and per rank the mesh groups created, the world communicators, the store
// round trips and payload bytes the mesh's groups cost, and how many of
// those round trips are the creation barrier that makes a group complete on
// every member before it returns anywhere (Gloo: 2 of the 4 per group).
// Each shape is measured twice: as is, and with the last dim
// given its own timeout ("+t"). Times and counts are the max over ranks,
// gathered through the store (no world communicator is needed for them).
// Starts --nproc local ranks with the //bootstrap launcher unless it runs
// under torchrun, Slurm or mpirun variables.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bootstrap/bootstrap.h"
#include "comm/gloo/gloo_communicator.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/guarded_communicator.h"
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
  int64_t groups = 0;  // mesh groups created (MeshRuntime::group_creations)
  int64_t round_trips = 0;
  int64_t bytes = 0;
  int64_t worlds = 0;  // world communicators made by the mesh's groups
  int64_t barrier_trips = 0;
};

// The max over ranks of each value, through the store: every rank Sets its
// values, rank 0 reads them all (O(world) at rank 0 alone, after the
// measurement) and publishes the maxima, which every rank reads back.
absl::StatusOr<std::vector<double>> MaxOverRanks(Bootstrap& boot, Store& store,
                                                 const std::string& prefix,
                                                 const std::vector<double>& v) {
  if (absl::Status s = store.Set(absl::StrCat(prefix, boot.rank()),
                                 absl::StrJoin(v, " "));
      !s.ok()) {
    return s;
  }
  if (boot.rank() == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < boot.world_size(); ++r) {
      keys.push_back(absl::StrCat(prefix, r));
    }
    auto all = store.MultiGet(keys, absl::Seconds(300));
    if (!all.ok()) return all.status();
    std::vector<double> max = v;
    for (const std::string& line : *all) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      for (size_t i = 0; i < max.size() && i < parts.size(); ++i) {
        double x = 0;
        if (absl::SimpleAtod(parts[i], &x)) max[i] = std::max(max[i], x);
      }
    }
    if (absl::Status s = store.Set(absl::StrCat(prefix, "max"),
                                   absl::StrJoin(max, " "));
        !s.ok()) {
      return s;
    }
  }
  auto line = store.Get(absl::StrCat(prefix, "max"), absl::Seconds(300));
  if (!line.ok()) return line.status();
  std::vector<double> max;
  for (absl::string_view part : absl::StrSplit(*line, ' ')) {
    double x = 0;
    if (!absl::SimpleAtod(part, &x)) {
      return absl::InternalError(absl::StrCat("bad maxima \"", *line, "\""));
    }
    max.push_back(x);
  }
  return max;
}

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
  const int64_t trips_before = (*runtime)->store_round_trips();
  const int64_t bytes_before = (*runtime)->store_bytes();
  auto t0 = Clock::now();
  auto groups = mesh->GetAllGroups();
  auto t1 = Clock::now();
  if (!groups.ok()) return groups.status();
  out.groups_s = Seconds(t0, t1);
  out.groups = (*runtime)->group_creations();
  out.round_trips = (*runtime)->store_round_trips() - trips_before;
  out.bytes = (*runtime)->store_bytes() - bytes_before;
  out.worlds = (*runtime)->world_communicators();
  for (const auto& group : *groups) {
    Communicator* backend = group.get();
    if (auto* guarded = dynamic_cast<GuardedCommunicator*>(backend)) {
      backend = guarded->inner();
    }
    auto* g = dynamic_cast<GlooCommunicator*>(backend);
    if (g != nullptr) out.barrier_trips += g->barrier_round_trips();
  }
  // The baseline: one world group (made now unless a dim already is it).
  if (absl::Status s = boot.Barrier(absl::StrCat("gc/b/", index)); !s.ok()) return s;
  auto t2 = Clock::now();
  auto world = (*runtime)->World(backend, absl::Seconds(300));
  auto t3 = Clock::now();
  if (!world.ok()) return world.status();
  out.world_s = Seconds(t2, t3);
  auto max = MaxOverRanks(
      boot, *store, absl::StrCat("gc/max/", index, "/"),
      {out.world_s, out.groups_s, static_cast<double>(out.groups),
       static_cast<double>(out.round_trips), static_cast<double>(out.bytes),
       static_cast<double>(out.worlds),
       static_cast<double>(out.barrier_trips)});
  if (!max.ok()) return max.status();
  const std::vector<double>& m = *max;
  return Sample{m[0],
                m[1],
                static_cast<int64_t>(m[2]),
                static_cast<int64_t>(m[3]),
                static_cast<int64_t>(m[4]),
                static_cast<int64_t>(m[5]),
                static_cast<int64_t>(m[6])};
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
      "#%-9s %12s %12s %8s %12s %12s %16s %16s %18s\n",
      backend, (*boot)->world_size(), repeats, "shape", "world (ms)",
      "groups (ms)", "ratio", "groups/rank", "worlds/rank",
      "store trips/rank", "store B/rank", "of which barrier");
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
        &table, " %-9s %12.2f %12.2f %8.2f %12d %12d %16d %16d %18d\n",
        absl::StrCat(absl::StrJoin(*shape, "x"), own_timeout ? "+t" : ""),
        w * 1e3, g * 1e3, g / w, last.groups, last.worlds, last.round_trips,
        last.bytes, last.barrier_trips);
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
