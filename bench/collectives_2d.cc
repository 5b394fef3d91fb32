// bazel run //bench:collectives_2d [-- --sizes=1M,16M --ops=all_gather,reduce_scatter]
//
// All-gather, reduce-scatter, reduce, gather, scatter and all-to-all-v
// along each dim of a DeviceMesh (float32, sum, root 0; all_to_all_v with
// uneven blocks, between half a block and one and a half), the devmesh side
// of tools/peer_bench.sh's collective rows. With no rendezvous variables in the environment it
// starts the mesh's ranks locally, each bound to one CPU (--cpu_bind=core), as
// allreduce_2d does; under torchrun, Slurm or mpirun it joins that job.
//
// Sizes are nccl-tests': the full buffer, size x count elements (all-gather's
// output, reduce-scatter's input). Measured as allreduce_2d measures an
// all-reduce: per (op, dim, size) --warmup untimed calls on the dim's group
// (DeviceMesh::GetGroup), then --iters timed runs, each BatchSize(bytes)
// back-to-back calls (clamp(ceil(8 MiB / bytes), 1, 100)) started after a
// barrier over a Gloo world of its own; a run's time is its slowest rank's;
// seconds = median over runs of run time / batch. algbw = bytes / seconds,
// busbw = algbw x (n - 1) / n, x 1 for reduce (nccl-tests'
// doc/PERFORMANCE.md). After timing,
// a fresh pattern (bench/test_pattern.h) goes through once and every element
// of every rank is checked. Rank 0 prints one line per (op, dim, size):
//   PEER_BENCH_COLLECTIVE {"op":..,"dim":..,"backend":..,"bytes":..,
//     "group_size":..,"batch":..,"iters":..,"seconds":..,"busbw_GBps":..,
//     "wrong":..}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/allreduce_table.h"
#include "bench/batch_size.h"
#include "bench/bench_flags.h"
#include "bench/local_launch.h"
#include "bench/device_buffer.h"
#include "bench/run_stats.h"
#include "bench/test_pattern.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "comm/registry.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"

ABSL_FLAG(std::string, mesh_shape, "2x2", "mesh shape, e.g. 2x2");
ABSL_FLAG(std::string, mesh_dim_names, "dp,tp", "comma-separated dim names");
ABSL_FLAG(std::string, sizes, "1M,16M",
          "full-buffer sizes (size x count elements), K/M/G suffixes");
ABSL_FLAG(std::string, ops, "all_gather,reduce_scatter",
          "comma-separated: all_gather, reduce_scatter, reduce, gather, "
          "scatter, all_to_all_v");
ABSL_FLAG(int, iters, 20, "timed runs per op, dim and size");
ABSL_FLAG(int, warmup, 5, "untimed calls before the timed ones");
ABSL_FLAG(std::string, backend, "auto", "auto, shm or gloo (CPU)");
ABSL_FLAG(std::string, cpu_bind, "core",
          "binding of the ranks this benchmark launches: core or none");

namespace devmesh {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "collectives_2d: %s\n", s.ToString().c_str());
  return code;
}

struct Result {
  double seconds = 0;
  int batch = 0;
  int64_t wrong = 0;
};

constexpr const char* kOps[] = {"all_gather", "reduce_scatter", "reduce",
                                "gather",     "scatter",        "all_to_all_v"};

// all_to_all_v's uneven blocks: member s sends member d block / 2 + block *
// ((s + d) % n) / (n - 1) elements (between half and one and a half blocks;
// about n blocks in all), element i worth 1000 s + 10 d + i % 7 (exact in
// float32).
size_t UnevenCount(int s, int d, int n, size_t block) {
  return block / 2 + (n > 1 ? block * static_cast<size_t>((s + d) % n) /
                                  static_cast<size_t>(n - 1)
                            : block / 2);
}
float UnevenValue(int s, int d, size_t i) {
  return static_cast<float>(1000 * s + 10 * d + static_cast<int>(i % 7));
}

// One (op, group, size) cell on float32 buffers of `bytes` (the full
// buffer: all-gather's and gather's output, reduce-scatter's and scatter's
// input, reduce's buffer, about all_to_all_v's total) and bytes / n (one
// member's block). Rooted ops use root 0.
absl::StatusOr<Result> RunCell(const std::string& op, Communicator& group,
                               Communicator& metrics, size_t bytes, int iters,
                               int warmup, int global_rank) {
  const int n = group.size();
  const int me = group.rank();
  const size_t count = bytes / sizeof(float) / n;  // one block, elements
  auto full = DeviceBuffer::Allocate("cpu", count * n * sizeof(float));
  auto block = DeviceBuffer::Allocate("cpu", count * sizeof(float));
  if (!full.ok()) return full.status();
  if (!block.ok()) return block.status();
  float* f = static_cast<float*>((*full)->data());
  float* b = static_cast<float*>((*block)->data());
  // all_to_all_v's counts, offsets and buffers.
  std::vector<size_t> send_counts(n), send_offsets(n), recv_counts(n),
      recv_offsets(n);
  size_t send_total = 0, recv_total = 0;
  for (int p = 0; p < n; ++p) {
    send_counts[p] = UnevenCount(me, p, n, count);
    send_offsets[p] = send_total;
    send_total += send_counts[p];
    recv_counts[p] = UnevenCount(p, me, n, count);
    recv_offsets[p] = recv_total;
    recv_total += recv_counts[p];
  }
  std::vector<float> v_send, v_recv;
  if (op == "all_to_all_v") {
    v_send.resize(send_total);
    v_recv.resize(recv_total);
  }
  const bool full_in =
      op == "reduce_scatter" || op == "reduce" || (op == "scatter" && me == 0);
  auto fill = [&] {
    if (op == "all_to_all_v") {
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < send_counts[p]; ++i) {
          v_send[send_offsets[p] + i] = UnevenValue(me, p, i);
        }
      }
      std::fill(v_recv.begin(), v_recv.end(), -1.0f);
    } else if (full_in) {
      FillPattern(f, count * n, DataType::kFloat32, global_rank);
      std::fill(b, b + count, 0.0f);
    } else {
      FillPattern(b, count, DataType::kFloat32, global_rank);
      std::fill(f, f + count * n, 0.0f);
    }
  };
  auto call = [&]() -> absl::Status {
    constexpr DataType kF32 = DataType::kFloat32;
    if (op == "all_gather") return group.AllGather(b, f, count, kF32);
    if (op == "reduce_scatter") {
      return group.ReduceScatter(f, b, count, kF32, ReduceOp::kSum);
    }
    if (op == "reduce") {
      return group.Reduce(f, me == 0 ? f : nullptr, count * n, kF32,
                          ReduceOp::kSum, 0);
    }
    if (op == "gather") return group.Gather(b, f, count, kF32, 0);
    if (op == "scatter") return group.Scatter(f, b, count, kF32, 0);
    return group.AllToAllV(v_send.data(), send_counts, send_offsets,
                           v_recv.data(), recv_counts, recv_offsets, kF32);
  };
  fill();
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = call(); !s.ok()) return s;
  }
  Result result;
  result.batch = BatchSize(bytes);
  std::vector<double> times;
  for (int it = 0; it < iters; ++it) {
    if (absl::Status s = metrics.Barrier(); !s.ok()) return s;
    const auto t0 = Clock::now();
    for (int k = 0; k < result.batch; ++k) {
      if (absl::Status s = call(); !s.ok()) return s;
    }
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() /
                    result.batch);
  }
  // The slowest rank's time per run.
  std::vector<double> all(times.size() * metrics.size());
  if (absl::Status s = metrics.AllGather(times.data(), all.data(),
                                         times.size(), DataType::kFloat64);
      !s.ok()) {
    return s;
  }
  std::vector<double> slowest(times.size(), 0.0);
  for (int r = 0; r < metrics.size(); ++r) {
    for (size_t i = 0; i < times.size(); ++i) {
      slowest[i] = std::max(slowest[i], all[r * times.size() + i]);
    }
  }
  result.seconds = Median(slowest);
  // A fresh pattern, once, every element checked.
  fill();
  if (absl::Status s = call(); !s.ok()) return s;
  int64_t wrong = 0;
  const std::vector<int>& members = group.global_ranks();
  int64_t factor_sum = 0;
  for (int g : members) factor_sum += PatternRankFactor(g);
  // Element j of the full pattern reduced over the members.
  auto reduced = [&](size_t j) {
    return static_cast<float>(factor_sum * static_cast<int64_t>(j % 3 + 1));
  };
  if (op == "all_gather" || (op == "gather" && me == 0)) {
    for (int j = 0; j < n; ++j) {
      wrong += CountWrong(f + j * count, count, DataType::kFloat32,
                          PatternRankFactor(members[j]));
    }
  } else if (op == "reduce_scatter") {
    // Block r of the full pattern starts at element r * count, whose
    // (i % 3) phase is shifted by r * count.
    const size_t offset = static_cast<size_t>(me) * count;
    for (size_t i = 0; i < count; ++i) {
      if (b[i] != reduced(offset + i)) ++wrong;
    }
  } else if (op == "reduce" && me == 0) {
    for (size_t i = 0; i < count * n; ++i) {
      if (f[i] != reduced(i)) ++wrong;
    }
  } else if (op == "scatter") {
    // Block me of the root's pattern.
    const int64_t factor = PatternRankFactor(members[0]);
    const size_t offset = static_cast<size_t>(me) * count;
    for (size_t i = 0; i < count; ++i) {
      if (b[i] != static_cast<float>(
                      factor * static_cast<int64_t>((offset + i) % 3 + 1))) {
        ++wrong;
      }
    }
  } else if (op == "all_to_all_v") {
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < recv_counts[p]; ++i) {
        if (v_recv[recv_offsets[p] + i] != UnevenValue(p, me, i)) ++wrong;
      }
    }
  }
  int64_t wrong_all = 0;
  if (absl::Status s = metrics.AllReduce(&wrong, &wrong_all, 1,
                                         DataType::kInt64, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  result.wrong = wrong_all;
  return result;
}

struct Config {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::vector<std::string> ops;
  int iters = 0;
  int warmup = 0;
  std::string backend;
  CpuBind cpu_bind = CpuBind::kCore;
};

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
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    auto bytes = ParseBytes(s);
    if (!bytes.ok()) return bytes.status();
    c.sizes.push_back(*bytes);
  }
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_ops), ',')) {
    if (std::find(std::begin(kOps), std::end(kOps), s) == std::end(kOps)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ops: '", s, "' is not one of ",
                       absl::StrJoin(kOps, ", ")));
    }
    c.ops.emplace_back(s);
  }
  c.iters = absl::GetFlag(FLAGS_iters);
  c.warmup = absl::GetFlag(FLAGS_warmup);
  if (c.iters < 1 || c.warmup < 0) {
    return absl::InvalidArgumentError("--iters must be >= 1, --warmup >= 0");
  }
  c.backend = absl::GetFlag(FLAGS_backend);
  if (c.backend != "auto" && c.backend != "shm" && c.backend != "gloo") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend must be auto, shm or gloo, not '", c.backend, "'"));
  }
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
      std::make_shared<PrefixStore>(bootstrap->store(), "bench/sync_world"),
      info->rank, info->world_size, side_options);
  if (!metrics.ok()) return Fail(metrics.status(), 1);
  std::vector<std::string> dims = mesh->dim_group_names();
  std::vector<std::shared_ptr<Communicator>> groups;
  for (int d = 0; d < mesh->ndim(); ++d) {
    auto g = mesh->GetGroup(d);
    if (!g.ok()) return Fail(g.status(), 1);
    groups.push_back(*g);
  }
  for (const std::string& op : config.ops) {
    for (int64_t bytes : config.sizes) {
      for (int d = 0; d < mesh->ndim(); ++d) {
        auto r = RunCell(op, *groups[d], **metrics,
                         static_cast<size_t>(bytes), config.iters,
                         config.warmup, info->rank);
        if (!r.ok()) return Fail(r.status(), 1);
        const int n = groups[d]->size();
        const int64_t total =
            static_cast<int64_t>(bytes / sizeof(float) / n * n * sizeof(float));
        // nccl-tests' factors: 1 for reduce, (n - 1) / n for the others.
        const double busbw = AlgBandwidthGBps(total, r->seconds) *
                             (op == "reduce" ? 1.0 : (n - 1.0) / n);
        if (info->rank == 0) {
          std::printf(
              "PEER_BENCH_COLLECTIVE {\"op\":\"%s\",\"dim\":\"%s\","
              "\"backend\":\"%s\",\"bytes\":%lld,\"group_size\":%d,"
              "\"batch\":%d,\"iters\":%d,\"seconds\":%.9g,"
              "\"busbw_GBps\":%.6g,\"wrong\":%lld}\n",
              op.c_str(), dims[d].c_str(),
              std::string(groups[d]->backend()).c_str(),
              static_cast<long long>(total), n, r->batch, config.iters,
              r->seconds, busbw, static_cast<long long>(r->wrong));
          std::fflush(stdout);
        }
      }
    }
  }
  return bootstrap->Barrier("collectives_2d/done").ok() ? 0 : 1;
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
  return devmesh::RunRankOrLaunch("collectives_2d", original, size, config->cpu_bind,
                                  [&] { return devmesh::RunRank(*config); });
}
