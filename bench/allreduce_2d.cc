// bazel run //bench:allreduce_2d [-- --mesh_shape=2x2 --mesh_dim_names=dp,tp ...]
//
// The main benchmark: all-reduce along each dim of a DeviceMesh, against the
// same backend's all-reduce on a group of the same ranks made directly with
// //comm (the "raw" baseline: a Split of a //comm world communicator, as
// DeviceMesh makes its groups, but without DeviceMesh). With no rendezvous
// variables in the environment it starts --nproc local ranks with the
// //bootstrap launcher, each bound to one CPU (--cpu_bind=core, as mpirun
// binds); under torchrun, Slurm or mpirun it joins that job instead and
// leaves the binding to it.
//
// Every group first does --warmup all-reduces of the largest size (as
// nccl-tests does). Then for each size and dim: --warmup untimed all-reduces
// per group, and timed iterations. An iteration is one run on the mesh group
// and one on the raw group, in alternating order, each started right after
// an untimed barrier of every rank (as the OSU micro-benchmarks do) over a
// Gloo world of its own and one untimed all-reduce on the group itself. A run
// is BatchSize(bytes) back-to-back all-reduces timed together; its time is
// its slowest rank's. Below 1 MiB there are
// exactly --iters iterations; from 1 MiB, more are added until the mesh/raw
// ratio is known to --target_ci, within --max_iters and --max_cell_seconds.
//
// It reports per all-reduce (median run time / batch): time, algbw =
// bytes / time, busbw = algbw * 2 (n - 1) / n (nccl-tests), #wrong (every
// element of every rank checked, for both groups), the raw group's time and
// busbw, and mesh/raw busbw: each iteration's raw run time over its mesh run
// time (both saw the same machine), the interquartile mean over iterations
// (bench/run_stats.h), with half the width of its 95% bootstrap interval;
// 1.0 means the mesh adds nothing. Results are also Google Benchmark runs,
// one benchmark iteration per (dim, size)
// (--benchmark_out=FILE --benchmark_out_format=json writes them on rank 0).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/allreduce_table.h"
#include "bench/batch_size.h"
#include "bench/run_stats.h"
#include "bench/bench_flags.h"
#include "bench/device_buffer.h"
#include "bench/explained_reporter.h"
#include "bench/test_pattern.h"
#include "benchmark/benchmark.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/host_layout.h"
#include "device_mesh/init_device_mesh.h"

ABSL_FLAG(std::string, mesh_shape, "2x2", "mesh shape, e.g. 2x2 or 2x2x2");
ABSL_FLAG(std::string, mesh_dim_names, "dp,tp", "comma-separated dim names");
ABSL_FLAG(std::string, min_bytes, "1K", "smallest message (K/M/G suffixes)");
ABSL_FLAG(std::string, max_bytes, "64M", "largest message (K/M/G suffixes)");
ABSL_FLAG(std::string, dtype, "float32",
          "float32, float64, float16, bfloat16, int8, uint8, int32, int64");
ABSL_FLAG(int, iters, 40,
          "timed iterations per size and dim, at least (an iteration is one "
          "run on the mesh group and one on the raw group)");
ABSL_FLAG(int, max_iters, 400,
          "from 1 MiB, more iterations, in blocks of 20, while the mesh/raw "
          "ratio's 95% interval is wider than +-target_ci, up to this many");
ABSL_FLAG(double, target_ci, 0.03,
          "stop adding iterations once the mesh/raw ratio is known to +- this "
          "(half width of its 95% bootstrap interval); 0: exactly --iters");
ABSL_FLAG(double, max_cell_seconds, 10,
          "stop adding iterations once a size and dim has run this long "
          "(wall seconds)");
ABSL_FLAG(int, warmup, 5, "untimed all-reduces before the timed ones");
ABSL_FLAG(std::string, backend, "auto",
          "auto (nccl when every rank has a GPU; else the CPU default: shared "
          "memory for groups whose members share it, UCX for the others), "
          "shm, gloo, ucx or nccl");
ABSL_FLAG(std::string, verify_calls, "",
          "the mesh's GroupOptions::verify_calls: empty (unset: on for Gloo "
          "groups only), true or false");
ABSL_FLAG(int, nproc, 0, "local ranks to launch (0: the mesh's size)");
ABSL_FLAG(bool, raw_call_check, true,
          "whether the raw shared-memory groups compare their members' calls "
          "(comm/call_check.h) as the mesh's do; false: mesh/raw then "
          "includes the check's cost");
ABSL_FLAG(std::string, cpu_bind, "core",
          "binding of the ranks this benchmark launches: core (one CPU each, "
          "round-robin, as mpirun --bind-to core) or none");

namespace devmesh {
namespace {

using Clock = std::chrono::steady_clock;

// Discards everything: the reporter of ranks other than 0.
class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

struct Setup {
  std::shared_ptr<MeshRuntime> runtime;
  int iters = 0;               // at least
  int max_iters = 0;           // at most
  double target_ci = 0;        // stop when the ratio's +-95% is within this
  double max_cell_seconds = 0;  // or when a cell has run this long
  // A Gloo world group over host memory for the barriers before each run
  // and the figures (times gathered, #wrong summed), whatever the backend
  // under test.
  std::shared_ptr<Communicator> metrics;
  std::string device_type;
  DataType dtype;
  int warmup;
};

// One (dim, size) cell: the mesh group, the raw group, and the result row.
struct Cell {
  std::shared_ptr<Communicator> mesh_group;
  std::shared_ptr<Communicator> raw_group;
  int64_t factor_sum = 0;  // sum of the group's pattern rank factors
  AllReduceRow row;
  bool ran = false;  // false when --benchmark_filter left it out
};

// Iterations added at a time after the first --iters.
constexpr size_t kExtraBlock = 20;

// From this size a run is a batch of all-reduces, and iterations are added
// until the mesh/raw ratio is known to --target_ci: the sizes at which the
// ratio measures the mesh's cost rather than the machine's wake-up latency.
constexpr size_t kLargeBytes = size_t{1} << 20;

// Gathers every rank's `v` (one value per iteration; the same count on every
// rank) and returns, per iteration, the largest.
absl::StatusOr<std::vector<double>> MaxPerIteration(
    Communicator& world, const std::vector<double>& v) {
  const size_t iters = v.size();
  std::vector<double> all(iters * world.size());
  if (absl::Status s =
          world.AllGather(v.data(), all.data(), iters, DataType::kFloat64);
      !s.ok()) {
    return s;
  }
  std::vector<double> out(iters, 0.0);
  for (int r = 0; r < world.size(); ++r) {
    for (size_t i = 0; i < iters; ++i) {
      out[i] = std::max(out[i], all[r * iters + i]);
    }
  }
  return out;
}

absl::Status RunCell(const Setup& setup, Cell& cell, benchmark::State& state) {
  const size_t count = cell.row.count;
  const size_t bytes = cell.row.bytes;
  auto host = DeviceBuffer::Allocate("cpu", bytes);
  auto send = DeviceBuffer::Allocate(setup.device_type, bytes);
  auto recv_mesh = DeviceBuffer::Allocate(setup.device_type, bytes);
  auto recv_raw = DeviceBuffer::Allocate(setup.device_type, bytes);
  for (auto* b : {&host, &send, &recv_mesh, &recv_raw}) {
    if (!b->ok()) return b->status();
  }
  FillPattern((*host)->data(), count, setup.dtype, setup.runtime->rank());
  if (absl::Status s = (*send)->CopyFromHost((*host)->data()); !s.ok()) {
    return s;
  }
  auto reduce = [&](Communicator& group, DeviceBuffer& recv) {
    return group.AllReduce((*send)->data(), recv.data(), count, setup.dtype,
                           ReduceOp::kSum);
  };
  for (int i = 0; i < setup.warmup; ++i) {
    if (absl::Status s = reduce(*cell.mesh_group, **recv_mesh); !s.ok()) return s;
    if (absl::Status s = reduce(*cell.raw_group, **recv_raw); !s.ok()) return s;
  }
  // A timed run is a batch of back-to-back all-reduces on one group, timed
  // together and divided (nccl-tests times its iterations the same way): an
  // all-reduce shorter than a scheduler tick is otherwise timed mostly by
  // where the tick fell.
  const int batch = BatchSize(bytes);
  cell.row.batch = batch;
  std::vector<double> mesh_times, raw_times;  // seconds per all-reduce
  // One timed iteration: a run on each group, in alternating order so that
  // neither always follows the other's traffic.
  auto iteration = [&](size_t index) -> absl::Status {
    const bool raw_first = index % 2 == 1;
    for (int k = 0; k < 2; ++k) {
      const bool raw = (k == 0) == raw_first;
      // Every rank starts the run together (the barrier is not timed). The
      // barrier's ranks leave it up to a Gloo wake-up apart; one untimed
      // all-reduce on the group under test lines its members up again, so
      // the run times all-reduces, not the barrier's exit skew (which, spread
      // over a 100-deep batch of 1 KiB all-reduces, read as 20-40 us each
      // instead of 3 on the shm tp groups).
      if (absl::Status s = setup.metrics->Barrier(); !s.ok()) return s;
      if (absl::Status s = raw ? reduce(*cell.raw_group, **recv_raw)
                               : reduce(*cell.mesh_group, **recv_mesh);
          !s.ok()) {
        return s;
      }
      const auto t0 = Clock::now();
      for (int b = 0; b < batch; ++b) {
        absl::Status s = raw ? reduce(*cell.raw_group, **recv_raw)
                             : reduce(*cell.mesh_group, **recv_mesh);
        if (!s.ok()) return s;
      }
      const double dt =
          std::chrono::duration<double>(Clock::now() - t0).count() / batch;
      (raw ? raw_times : mesh_times).push_back(dt);
    }
    return absl::OkStatus();
  };
  // A run's time is its slowest rank's: every rank started it together, so
  // that is when the all-reduce had finished on every group along the dim.
  // The overhead ratio from paired runs: each iteration's raw time over its
  // mesh time (back to back, so both saw the same machine), averaged over
  // the middle half of the iterations (the interquartile mean). Every rank
  // computes the same figures from the same gathered times, so every rank
  // takes the same decision to stop.
  std::vector<double> mesh_runs, raw_runs, paired;
  double ci = 0;
  auto gather = [&]() -> absl::Status {
    const size_t n = mesh_times.size();
    auto m = MaxPerIteration(*setup.metrics, mesh_times);
    if (!m.ok()) return m.status();
    auto r = MaxPerIteration(*setup.metrics, raw_times);
    if (!r.ok()) return r.status();
    mesh_runs = *std::move(m);
    raw_runs = *std::move(r);
    paired.assign(n, 1.0);
    for (size_t i = 0; i < n; ++i) {
      if (mesh_runs[i] > 0) paired[i] = raw_runs[i] / mesh_runs[i];
    }
    ci = BootstrapHalfWidth95(paired);
    return absl::OkStatus();
  };
  const bool adaptive = bytes >= kLargeBytes && setup.target_ci > 0;
  const auto cell_start = Clock::now();
  for (auto _ : state) {  // one benchmark iteration: the whole cell
    size_t block = static_cast<size_t>(setup.iters);
    while (true) {
      const size_t first = mesh_times.size();
      for (size_t i = first; i < first + block; ++i) {
        if (absl::Status s = iteration(i); !s.ok()) return s;
      }
      if (absl::Status s = gather(); !s.ok()) return s;
      const size_t n = mesh_times.size();
      if (!adaptive || ci <= setup.target_ci ||
          n >= static_cast<size_t>(setup.max_iters)) {
        break;
      }
      // The slowest rank's wall time, so that every rank stops together.
      double elapsed =
          std::chrono::duration<double>(Clock::now() - cell_start).count();
      double max_elapsed = 0;
      if (absl::Status s =
              setup.metrics->AllReduce(&elapsed, &max_elapsed, 1,
                                       DataType::kFloat64, ReduceOp::kMax);
          !s.ok()) {
        return s;
      }
      if (max_elapsed >= setup.max_cell_seconds) break;
      block = std::min<size_t>(kExtraBlock, setup.max_iters - n);
    }
    cell.row.iters = static_cast<int>(mesh_runs.size());
    cell.row.mesh_seconds = Median(mesh_runs);
    cell.row.raw_seconds = Median(raw_runs);
    cell.row.paired_ratio = InterquartileMean(paired);
    cell.row.ratio_ci95 = ci;
    state.SetIterationTime(cell.row.mesh_seconds);
  }
  int64_t wrong = 0;
  for (DeviceBuffer* recv : {recv_mesh->get(), recv_raw->get()}) {
    if (absl::Status s = recv->CopyToHost((*host)->data()); !s.ok()) return s;
    wrong += CountWrong((*host)->data(), count, setup.dtype, cell.factor_sum);
  }
  int64_t wrong_all = 0;
  if (absl::Status s = setup.metrics->AllReduce(
          &wrong, &wrong_all, 1, DataType::kInt64, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  cell.row.wrong = wrong_all;
  const int n = cell.row.group_size;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  const double mesh_s = cell.row.mesh_seconds, raw_s = cell.row.raw_seconds;
  state.counters["algbw_GBps"] = AlgBandwidthGBps(bytes, mesh_s);
  state.counters["busbw_GBps"] = AllReduceBusBandwidthGBps(bytes, n, mesh_s);
  state.counters["raw_busbw_GBps"] = AllReduceBusBandwidthGBps(bytes, n, raw_s);
  state.counters["batch"] = batch;
  state.counters["iters"] = cell.row.iters;
  state.counters["wrong"] = static_cast<double>(wrong_all);
  state.counters["mesh_over_raw_busbw"] = cell.row.paired_ratio;
  state.counters["mesh_over_raw_ci95"] = cell.row.ratio_ci95;
  return absl::OkStatus();
}

// --warmup all-reduces of the sweep's largest size on every mesh and raw
// group, untimed.
absl::Status WarmUpAtLargest(const Setup& setup, const std::vector<Cell>& cells) {
  size_t count = 0;
  for (const Cell& cell : cells) count = std::max(count, size_t(cell.row.count));
  const size_t bytes = count * DataTypeSize(setup.dtype);
  auto send = DeviceBuffer::Allocate(setup.device_type, bytes);
  if (!send.ok()) return send.status();
  auto recv = DeviceBuffer::Allocate(setup.device_type, bytes);
  if (!recv.ok()) return recv.status();
  std::vector<Communicator*> groups;
  for (const Cell& cell : cells) {
    for (Communicator* g : {cell.mesh_group.get(), cell.raw_group.get()}) {
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) {
        groups.push_back(g);
      }
    }
  }
  for (Communicator* g : groups) {
    for (int i = 0; i < setup.warmup; ++i) {
      if (absl::Status s = g->AllReduce((*send)->data(), (*recv)->data(),
                                        count, setup.dtype, ReduceOp::kSum);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// The raw baseline for dim `d`: a group of this rank's line made directly
// with //comm, without DeviceMesh: a Split of a world communicator of our
// own (built like DeviceMesh's, so both sides share one transport device per
// world and are compared like with like).
// When the mesh's group is shared memory, the raw one is too: the same
// transport (ShareMemory on the split: its set-up runs over the Gloo split
// where the mesh's runs over the store, and every collective then takes the
// same shm code), so mesh/raw is DeviceMesh's cost (with
// --raw_call_check=false, DeviceMesh's and the per-call check's).
absl::StatusOr<std::shared_ptr<Communicator>> RawGroup(
    const DeviceMesh& mesh, int d, Communicator& raw_world,
    const Communicator& mesh_group) {
  auto ck = mesh.layout().SplitColorKey(mesh.GetRank(), d);
  if (!ck.ok()) return ck.status();
  auto comm = raw_world.Split(static_cast<int>(ck->color),
                              static_cast<int>(ck->key));
  if (!comm.ok()) return comm.status();
  std::shared_ptr<Communicator> raw(*std::move(comm));
  if (mesh_group.backend() != "shm") {
    return raw;
  }
  ShmOptions shm;
  shm.require = true;
  shm.check_calls = absl::GetFlag(FLAGS_raw_call_check);
  return ShareMemory(std::move(raw), shm);
}

// The flags, checked once (before launching, so that a bad flag is one
// error, not one per rank).
struct Config {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int64_t> sweep;
  DataType dtype = DataType::kFloat32;
  std::string backend;  // "auto", "shm", "gloo", "ucx" or "nccl"
  std::optional<bool> verify_calls;
  int iters = 0;
  int max_iters = 0;
  double target_ci = 0;
  double max_cell_seconds = 0;
  int warmup = 0;
  int nproc = 0;  // ranks to launch
  CpuBind cpu_bind = CpuBind::kCore;  // of the ranks launched
};

absl::StatusOr<Config> ParseConfig() {
  Config c;
  auto shape = ParseMeshShape(absl::GetFlag(FLAGS_mesh_shape));
  if (!shape.ok()) return shape.status();
  c.shape = *shape;
  c.names = ParseDimNames(absl::GetFlag(FLAGS_mesh_dim_names));
  if (!c.names.empty()) {
    if (c.names.size() != c.shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--mesh_dim_names gives ", c.names.size(), " names for the ",
          c.shape.size(), "-d --mesh_shape ", absl::GetFlag(FLAGS_mesh_shape)));
    }
    for (size_t i = 0; i < c.names.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (c.names[i] == c.names[j]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--mesh_dim_names repeats '", c.names[i], "'"));
        }
      }
    }
  }
  auto dtype = ParseDataType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  c.dtype = *dtype;
  auto min_b = ParseBytes(absl::GetFlag(FLAGS_min_bytes));
  if (!min_b.ok()) return min_b.status();
  auto max_b = ParseBytes(absl::GetFlag(FLAGS_max_bytes));
  if (!max_b.ok()) return max_b.status();
  auto sweep = ByteSweep(*min_b, *max_b);
  if (!sweep.ok()) return sweep.status();
  if (*min_b < static_cast<int64_t>(DataTypeSize(c.dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_bytes (", *min_b, ") is smaller than one ",
        DataTypeName(c.dtype), " element (", DataTypeSize(c.dtype),
        " bytes)"));
  }
  c.sweep = *sweep;
  c.backend = absl::GetFlag(FLAGS_backend);
  if (c.backend != "auto" && c.backend != "shm" && c.backend != "gloo" &&
      c.backend != "ucx" && c.backend != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend must be auto, shm, gloo, ucx or nccl, not '", c.backend,
        "'"));
  }
  if (const std::string v = absl::GetFlag(FLAGS_verify_calls); v == "true") {
    c.verify_calls = true;
  } else if (v == "false") {
    c.verify_calls = false;
  } else if (!v.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--verify_calls must be empty, true or false, not '", v, "'"));
  }
  c.iters = absl::GetFlag(FLAGS_iters);
  c.warmup = absl::GetFlag(FLAGS_warmup);
  if (c.iters < 1 || c.warmup < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--iters (", c.iters, ") must be >= 1 and --warmup (", c.warmup,
        ") >= 0"));
  }
  c.max_iters = std::max(absl::GetFlag(FLAGS_max_iters), c.iters);
  if (c.max_iters > 100000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_iters (", c.max_iters, ") must be at most 100000"));
  }
  c.target_ci = absl::GetFlag(FLAGS_target_ci);
  c.max_cell_seconds = absl::GetFlag(FLAGS_max_cell_seconds);
  if (!(c.target_ci >= 0) || !(c.max_cell_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target_ci (", c.target_ci, ") and --max_cell_seconds (",
        c.max_cell_seconds, ") must be >= 0"));
  }
  int64_t size = 1;
  for (int64_t s : c.shape) size = s > 4096 / size ? 4097 : size * s;
  auto bind = ParseCpuBind(absl::GetFlag(FLAGS_cpu_bind));
  if (!bind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_bind: ", bind.status().message()));
  }
  c.cpu_bind = *bind;
  c.nproc = absl::GetFlag(FLAGS_nproc);
  if (c.nproc == 0) c.nproc = size > 4096 ? 4097 : static_cast<int>(size);
  if (c.nproc < 1 || c.nproc > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nproc (", c.nproc, ", or the mesh's size) must be in [1, 4096]"));
  }
  return c;
}

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "allreduce_2d: %s\n", s.ToString().c_str());
  return code;
}

int RunRank(const Config& config) {
  auto info = RendezvousInfoFromEnv();
  if (!info.ok()) return Fail(info.status(), 2);
  const bool leader = info->rank == 0;
  const std::vector<int64_t>* sweep = &config.sweep;
  const DataType* dtype = &config.dtype;
  std::string backend = config.backend;
  if (backend == "auto") {
    backend = (info->local_world_size == info->world_size &&
               HasCudaDevices(info->local_world_size))
                  ? "nccl"
                  : "auto";
  }
  const std::string device_type = backend == "nccl" ? "cuda" : "cpu";
  auto bootstrap = Bootstrap::Create(*info, BootstrapOptions{});
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "allreduce_2d: %s\n",
                 bootstrap.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<Bootstrap> boot = *std::move(bootstrap);
  std::shared_ptr<Store> store = boot->store();
  MeshOptions options;
  options.all.backend = backend;
  options.all.verify_calls = config.verify_calls;
  // For NCCL this also selects the local rank's GPU, before any buffer.
  auto mesh = InitDeviceMesh(boot, device_type, config.shape, config.names,
                             options);
  if (!mesh.ok()) {
    std::fprintf(stderr, "allreduce_2d: %s\n", mesh.status().ToString().c_str());
    return 2;
  }
  const int iters = config.iters;
  const int warmup = config.warmup;
  // The barriers and figures go through a Gloo world of their own (its own
  // transport device and threads), so that neither the mesh's groups nor
  // the raw ones are warmed up by the barrier before each run.
  // Both side worlds advertise the address the mesh's groups do (this
  // rank's address toward its peers, see device_mesh/peer_address.h).
  CommOptions side_options;
  side_options.gloo.store_route_address =
      mesh->runtime()->store_route_address();
  auto metrics = CreateCommunicator(
      "gloo", std::make_shared<PrefixStore>(store, "bench/sync_world"),
      info->rank, info->world_size, side_options);
  if (!metrics.ok()) return Fail(metrics.status(), 1);
  Setup setup{mesh->runtime(),
              iters,
              config.max_iters,
              config.target_ci,
              config.max_cell_seconds,
              std::move(*metrics),
              device_type,
              *dtype,
              warmup};

  // Groups first (the mesh's by GetGroup, the raw ones directly), so that
  // timed runs never include creation.
  // The raw world is the transport's own ("gloo" under "auto" and "shm";
  // RawGroup gives its splits shared memory where the mesh's groups have it).
  auto raw_world = CreateCommunicator(
      backend == "nccl" || backend == "ucx" ? backend : "gloo",
      std::make_shared<PrefixStore>(store, "bench/raw_world"),
      info->rank, info->world_size, side_options);
  if (!raw_world.ok()) return Fail(raw_world.status(), 1);
  std::vector<std::string> dims = mesh->dim_group_names();
  std::vector<Cell> cells;
  for (int d = 0; d < mesh->ndim(); ++d) {
    auto group = mesh->GetGroup(d);
    auto raw = group.ok() ? RawGroup(*mesh, d, **raw_world, **group)
                          : absl::StatusOr<std::shared_ptr<Communicator>>(
                                group.status());
    if (!raw.ok()) {
      std::fprintf(stderr, "allreduce_2d: group of dim %s: %s\n",
                   dims[d].c_str(), raw.status().ToString().c_str());
      return 1;
    }
    // The expected sums come from //mesh's group, not the group under test.
    auto line = mesh->layout().GroupOf(mesh->GetRank(), d);
    if (!line.ok()) {
      std::fprintf(stderr, "allreduce_2d: %s\n", line.status().ToString().c_str());
      return 1;
    }
    int64_t factor_sum = 0;
    for (int64_t g : *line) factor_sum += PatternRankFactor(static_cast<int>(g));
    if (factor_sum * 3 > PatternExactLimit(*dtype)) {
      std::fprintf(stderr,
                   "allreduce_2d: dim %s has %zu ranks: its sums are not exact "
                   "in %s; use a wider --dtype\n",
                   dims[d].c_str(), line->size(),
                   std::string(DataTypeName(*dtype)).c_str());
      return 2;
    }
    for (int64_t bytes : *sweep) {
      Cell cell{*group, *raw, factor_sum, {}};
      cell.row.count = bytes / DataTypeSize(*dtype);
      cell.row.bytes = cell.row.count * DataTypeSize(*dtype);
      cell.row.dim = dims[d];
      cell.row.group_size = (*group)->size();
      cells.push_back(std::move(cell));
    }
  }
  // Size-major order: every dim at one size, then the next size.
  std::vector<Cell*> order;
  for (size_t s = 0; s < sweep->size(); ++s) {
    for (int d = 0; d < mesh->ndim(); ++d) {
      order.push_back(&cells[d * sweep->size() + s]);
    }
  }
  // Warm every group up at the largest size first, as nccl-tests does: the
  // first large transfers grow each TCP socket's receive buffer (Linux
  // autotuning, which never shrinks it), and a group whose sockets had grown
  // less than the other group's would be slower at every size after it.
  if (absl::Status s = WarmUpAtLargest(setup, cells); !s.ok()) {
    return Fail(s, 1);
  }
  absl::Status failure = absl::OkStatus();
  for (size_t i = 0; i < order.size(); ++i) {
    Cell* cell = order[i];
    const std::string name = absl::StrCat("allreduce_2d/", cell->row.dim, "/",
                                          cell->row.bytes);
    benchmark::RegisterBenchmark(
        name.c_str(),
        [&setup, cell, &failure, leader, i, n = order.size()](
            benchmark::State& state) {
          cell->ran = true;
          absl::Status s = failure.ok() ? RunCell(setup, *cell, state) : failure;
          if (!s.ok()) {
            failure = s;
            state.SkipWithError(s.ToString().c_str());
          }
          if (leader) {
            std::fprintf(stderr, "allreduce_2d: %zu/%zu %s %lld B done\n",
                         i + 1, n, cell->row.dim.c_str(),
                         static_cast<long long>(cell->row.bytes));
          }
        })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  NullReporter null_reporter;
  if (leader) {
    // The console lines without counters: the table below has them, in GB/s.
    bench::ExplainedReporter reporter(/*drop_console_counters=*/true);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  } else {
    benchmark::RunSpecifiedBenchmarks(&null_reporter);
  }
  if (!failure.ok()) {
    std::fprintf(stderr, "allreduce_2d: %s\n", failure.ToString().c_str());
    return 1;
  }
  if (leader) {
    std::vector<AllReduceRow> rows;
    for (Cell* cell : order) {
      if (cell->ran) rows.push_back(cell->row);
    }
    if (rows.empty()) {
      std::fprintf(stderr, "allreduce_2d: --benchmark_filter matched no run\n");
      return 2;
    }
    const std::string title = absl::StrCat(
        mesh->ToString(), " backend ", backend, ", ", info->world_size,
        " ranks, ", DataTypeName(*dtype), " sum, ", warmup, " warmup, ",
        iters, " iters",
        config.target_ci > 0
            ? absl::StrCat(" (from 1 MiB more, up to ", config.max_iters,
                           ", until mesh/raw is within +-", config.target_ci,
                           " or a size has run ", config.max_cell_seconds,
                           " s)")
            : "");
    std::fputs(FormatAllReduceTable(title, rows).c_str(), stdout);
    // Per dim, whether its groups stayed inside one host (device_mesh/
    // host_layout.h): a dim that crosses hosts runs over the network.
    auto spans = DimHostSpans(*mesh);
    for (int d = 0; d < mesh->ndim(); ++d) {
      std::string where =
          !spans.ok() ? "hosts unknown"
          : (*spans)[d].inside_host
              ? "inside one host"
              : absl::StrCat("crosses hosts: ", (*spans)[d].ToString());
      std::string transport = "no group";
      for (const Cell& cell : cells) {
        if (cell.row.dim == dims[d]) {
          transport = std::string(cell.mesh_group->backend());
          break;
        }
      }
      std::printf("# dim %s: %s, backend %s\n", dims[d].c_str(),
                  where.c_str(), transport.c_str());
    }
    std::fflush(stdout);
  }
  return boot->Barrier("allreduce_2d/done").ok() ? 0 : 1;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  std::vector<std::string> original(argv, argv + argc);
  // Only rank 0 writes --benchmark_out; the others drop the flag.
  std::vector<char*> args(argv, argv + argc);
  if (devmesh::HasRendezvousEnv()) {
    auto info = devmesh::RendezvousInfoFromEnv();
    if (info.ok() && info->rank != 0) {
      std::vector<char*> kept;
      for (char* a : args) {
        if (std::string(a).rfind("--benchmark_out", 0) != 0) kept.push_back(a);
      }
      args = kept;
    }
  }
  int bargc = static_cast<int>(args.size());
  benchmark::Initialize(&bargc, args.data());
  absl::ParseCommandLine(bargc, args.data());
  auto config = devmesh::ParseConfig();
  if (!config.ok()) return devmesh::Fail(config.status(), 2);
  if (devmesh::HasRendezvousEnv()) return devmesh::RunRank(*config);

  devmesh::LaunchOptions launch;
  launch.nproc = config->nproc;
  launch.cpu_bind = config->cpu_bind;
  launch.argv = original;
  launch.argv[0] = "/proc/self/exe";
  auto code = devmesh::LaunchLocal(launch);
  if (!code.ok()) return devmesh::Fail(code.status(), 1);
  return *code;
}
