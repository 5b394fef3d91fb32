// bazel run -c opt //bench:overlap [-- --mesh_shape=2x2 --bytes=1M]
//
// Compute overlapped with an all-reduce along each dim of a DeviceMesh,
// against the same work serialized: the devmesh side of
// tools/overlap_bench.sh (tools/peer_bench/torch_overlap.py is PyTorch's,
// with async_op=True). With no rendezvous variables it starts the mesh's
// ranks locally, each bound to one CPU (--cpu_bind=core), as allreduce_2d
// does.
//
// Per dim: the all-reduce (float32, --bytes, max: the buffer stays exact
// call after call) is timed blocking; a compute kernel (a dependent
// multiply-add pass over a 64 KiB float32 array, repeated) is calibrated on
// each rank to take as long, and the group agrees on the largest repeat
// count; then --iters runs of each, after a barrier on a Gloo world of its
// own, the run's time its slowest rank's, the median over runs:
//   serial   AllReduce, then the kernel
//   overlap  IAllReduce, the kernel, Work::Wait
// overlap / serial is 0.5 when the two hide each other perfectly and 1 when
// nothing overlaps. Rank 0 prints one line per dim:
//   OVERLAP {"side":"devmesh","dim":..,"group_size":..,"bytes":..,
//            "comm_s":..,"compute_s":..,"serial_s":..,"overlap_s":..,
//            "wrong":..}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_flags.h"
#include "bench/local_launch.h"
#include "bench/run_stats.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "comm/registry.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "store/prefix_store.h"

ABSL_FLAG(std::string, mesh_shape, "2x2", "mesh shape, e.g. 2x2 or 1x2");
ABSL_FLAG(std::string, mesh_dim_names, "dp,tp", "comma-separated dim names");
ABSL_FLAG(std::string, bytes, "1M", "all-reduce size, K/M/G suffixes");
ABSL_FLAG(int, iters, 20, "timed runs of each form per dim");
ABSL_FLAG(int, warmup, 3, "untimed runs before the timed ones");
ABSL_FLAG(std::string, backend, "auto", "auto, shm, gloo or ucx (CPU)");
ABSL_FLAG(std::string, cpu_bind, "core",
          "binding of the ranks this benchmark launches: core or none");

namespace devmesh {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "overlap: %s\n", s.ToString().c_str());
  return code;
}

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Where Kernel leaves a value, so that its work is not optimized away.
volatile float g_kernel_sink = 0;

// `repeats` dependent multiply-add passes over `a`.
void Kernel(std::vector<float>& a, int64_t repeats) {
  for (int64_t r = 0; r < repeats; ++r) {
    for (float& x : a) x = x * 0.999999f + 0.5f;
  }
  g_kernel_sink = a[a.size() / 2];
}

// The slowest rank's value of each of `mine`, through `metrics`.
absl::StatusOr<std::vector<double>> Slowest(Communicator& metrics,
                                            const std::vector<double>& mine) {
  std::vector<double> out(mine.size());
  if (absl::Status s = metrics.AllReduce(mine.data(), out.data(), mine.size(),
                                         DataType::kFloat64, ReduceOp::kMax);
      !s.ok()) {
    return s;
  }
  return out;
}

struct Config {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  int64_t bytes = 0;
  int iters = 0;
  int warmup = 0;
  std::string backend;
  CpuBind cpu_bind = CpuBind::kCore;
};

absl::Status RunDim(Communicator& group, Communicator& metrics,
                    const std::string& dim, const Config& c, int global_rank) {
  const size_t count = static_cast<size_t>(c.bytes) / sizeof(float);
  std::vector<float> buf(count, static_cast<float>(global_rank + 1));
  std::vector<float> work(16384, 1.0f);
  auto reduce = [&] {
    return group.AllReduce(buf.data(), buf.data(), count, DataType::kFloat32,
                           ReduceOp::kMax);
  };
  // 1. The all-reduce alone.
  std::vector<double> comm;
  for (int i = 0; i < c.warmup + c.iters; ++i) {
    if (absl::Status s = metrics.Barrier(); !s.ok()) return s;
    const auto t0 = Clock::now();
    if (absl::Status s = reduce(); !s.ok()) return s;
    if (i >= c.warmup) comm.push_back(Seconds(t0));
  }
  auto comm_slowest = Slowest(metrics, comm);
  if (!comm_slowest.ok()) return comm_slowest.status();
  const double comm_s = Median(*comm_slowest);
  // 2. The kernel's repeats for as long, the largest any rank needs.
  int64_t repeats = 1;
  for (;;) {
    const auto t0 = Clock::now();
    Kernel(work, repeats);
    const double t = Seconds(t0);
    if (t >= comm_s || repeats > (int64_t{1} << 30)) {
      repeats = std::max<int64_t>(
          1, static_cast<int64_t>(repeats * comm_s / std::max(t, 1e-9)));
      break;
    }
    repeats *= 2;
  }
  if (absl::Status s = metrics.AllReduce(&repeats, &repeats, 1,
                                         DataType::kInt64, ReduceOp::kMax);
      !s.ok()) {
    return s;
  }
  // 3. Compute alone, serialized, overlapped.
  std::vector<double> compute, serial, overlap;
  for (int i = 0; i < c.warmup + c.iters; ++i) {
    if (absl::Status s = metrics.Barrier(); !s.ok()) return s;
    auto t0 = Clock::now();
    Kernel(work, repeats);
    const double k = Seconds(t0);
    if (absl::Status s = metrics.Barrier(); !s.ok()) return s;
    t0 = Clock::now();
    if (absl::Status s = reduce(); !s.ok()) return s;
    Kernel(work, repeats);
    const double ser = Seconds(t0);
    if (absl::Status s = metrics.Barrier(); !s.ok()) return s;
    t0 = Clock::now();
    Work w = group.IAllReduce(buf.data(), buf.data(), count,
                              DataType::kFloat32, ReduceOp::kMax);
    Kernel(work, repeats);
    if (absl::Status s = w.Wait(); !s.ok()) return s;
    const double ovl = Seconds(t0);
    if (i >= c.warmup) {
      compute.push_back(k);
      serial.push_back(ser);
      overlap.push_back(ovl);
    }
  }
  std::vector<double> mine = compute;
  mine.insert(mine.end(), serial.begin(), serial.end());
  mine.insert(mine.end(), overlap.begin(), overlap.end());
  auto slow = Slowest(metrics, mine);
  if (!slow.ok()) return slow.status();
  const size_t n = compute.size();
  auto part = [&](size_t k) {
    return Median(std::vector<double>(slow->begin() + k * n,
                                      slow->begin() + (k + 1) * n));
  };
  // Every element is the group's largest rank + 1.
  int want = 0;
  for (int g : group.global_ranks()) want = std::max(want, g + 1);
  int64_t wrong = 0;
  for (float x : buf) wrong += x != static_cast<float>(want) ? 1 : 0;
  if (absl::Status s = metrics.AllReduce(&wrong, &wrong, 1, DataType::kInt64,
                                         ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  if (global_rank == 0) {
    std::printf(
        "OVERLAP {\"side\":\"devmesh\",\"backend\":\"%s\",\"dim\":\"%s\","
        "\"group_size\":%d,\"bytes\":%lld,\"comm_s\":%.9g,\"compute_s\":%.9g,"
        "\"serial_s\":%.9g,\"overlap_s\":%.9g,\"wrong\":%lld}\n",
        std::string(group.backend()).c_str(), dim.c_str(), group.size(),
        static_cast<long long>(c.bytes), comm_s, part(0), part(1), part(2),
        static_cast<long long>(wrong));
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> ParseConfig() {
  Config c;
  auto shape = ParseMeshShape(absl::GetFlag(FLAGS_mesh_shape));
  if (!shape.ok()) return shape.status();
  c.shape = *shape;
  c.names = ParseDimNames(absl::GetFlag(FLAGS_mesh_dim_names));
  if (!c.names.empty() && c.names.size() != c.shape.size()) {
    return absl::InvalidArgumentError(
        "--mesh_dim_names needs one name per dim of --mesh_shape");
  }
  auto bytes = ParseBytes(absl::GetFlag(FLAGS_bytes));
  if (!bytes.ok()) return bytes.status();
  c.bytes = *bytes;
  if (c.bytes < 4) return absl::InvalidArgumentError("--bytes must be >= 4");
  c.iters = absl::GetFlag(FLAGS_iters);
  c.warmup = absl::GetFlag(FLAGS_warmup);
  if (c.iters < 1 || c.warmup < 0) {
    return absl::InvalidArgumentError("--iters must be >= 1, --warmup >= 0");
  }
  c.backend = absl::GetFlag(FLAGS_backend);
  auto bind = ParseCpuBind(absl::GetFlag(FLAGS_cpu_bind));
  if (!bind.ok()) return bind.status();
  c.cpu_bind = *bind;
  return c;
}

int RunRank(const Config& config) {
  auto info = RendezvousInfoFromEnv();
  if (!info.ok()) return Fail(info.status(), 2);
  auto boot = Bootstrap::Create(*info, BootstrapOptions{});
  if (!boot.ok()) return Fail(boot.status(), 1);
  std::shared_ptr<Bootstrap> bootstrap = *std::move(boot);
  MeshOptions options;
  options.all.backend = config.backend;
  auto mesh = InitDeviceMesh(bootstrap, "cpu", config.shape, config.names,
                             options);
  if (!mesh.ok()) return Fail(mesh.status(), 2);
  CommOptions side_options;
  side_options.gloo.store_route_address =
      mesh->runtime()->store_route_address();
  auto metrics = CreateCommunicator(
      "gloo",
      std::make_shared<PrefixStore>(bootstrap->store(), "bench/overlap_world"),
      info->rank, info->world_size, side_options);
  if (!metrics.ok()) return Fail(metrics.status(), 1);
  std::vector<std::string> dims = mesh->dim_group_names();
  for (int d = 0; d < mesh->ndim(); ++d) {
    auto g = mesh->GetGroup(d);
    if (!g.ok()) return Fail(g.status(), 1);
    if (absl::Status s = RunDim(**g, **metrics, dims[d], config, info->rank);
        !s.ok()) {
      return Fail(s, 1);
    }
  }
  return bootstrap->Barrier("overlap/done").ok() ? 0 : 1;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  std::vector<std::string> original(argv, argv + argc);
  absl::ParseCommandLine(argc, argv);
  auto config = devmesh::ParseConfig();
  if (!config.ok()) return devmesh::Fail(config.status(), 2);
  int64_t size = 1;
  for (int64_t s : config->shape) size *= s;
  return devmesh::RunRankOrLaunch("overlap", original, size, config->cpu_bind,
                                  [&] { return devmesh::RunRank(*config); });
}
