// bazel run //bench:mesh_ops_peer [-- --worlds=8,1024,32768,1048576]
//
// DeviceMesh-level layout operations as a user calls them, the devmesh side
// of tools/peer_bench.sh's layout rows (tools/peer_bench/torch_layout.py
// times PyTorch's DeviceMesh the same way). At each world size W the mesh is
// (a, W/a) named (dp, tp), a = 2^floor(log2(W)/2) (2x4, 32x32, 128x256,
// 1024x1024), over a MeshRuntime of world W on an in-memory store (no
// process, no group is created: devmesh makes groups lazily), seen from rank
// W/2 + 3 (PyTorch's side uses the same rank). Operations:
//   build            InitDeviceMesh(runtime, "cpu", {a, W/a}, {"dp", "tp"})
//   slice            mesh.Slice({"dp"})
//   flatten          mesh.Flatten()           (name "dp_tp")
//   get_coordinate   mesh.GetCoordinate()
//   get_local_rank   mesh.GetLocalRank("tp")
// Two figures per operation, in nanoseconds: "first" is the median over
// --samples of one call on a fresh root mesh (what a user pays the first
// time; PyTorch caches slices and flattens on the root), "repeat" the median
// over --samples of the mean of --calls back-to-back calls on one mesh.
// Then the memory of one mesh at the largest world: heap bytes in use
// (glibc mallinfo2: uordblks + hblkhd) and resident set (VmRSS) before and
// after building it, with the mesh kept alive (after one untimed build of a
// mesh of 8, so that one-time set-up is not counted).
//
// Output, one JSON object per line:
//   PEER_BENCH_LAYOUT {"op":"slice","world":1024,"first_ns":..,"repeat_ns":..}
//   PEER_BENCH_MEMORY {"world":1048576,"heap_bytes":..,"rss_bytes":..}
// Exit codes: 0 success, 1 a devmesh call failed (printed), 2 bad flags.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "bench/run_stats.h"
#include "store/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"

ABSL_FLAG(std::string, worlds, "8,1024,32768,1048576",
          "comma-separated world sizes, each a power of two >= 8");
ABSL_FLAG(int, samples, 21, "samples per operation and world (median shown)");
ABSL_FLAG(int, calls, 200, "back-to-back calls timed together for 'repeat'");

namespace devmesh {
namespace {

using Clock = std::chrono::steady_clock;

double Ns(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::nano>(b - a).count();
}

int Log2(int64_t w) {
  int k = 0;
  while ((int64_t{1} << (k + 1)) <= w) ++k;
  return k;
}

// The rank whose view is timed: in the middle of the world, off any edge.
int RankOf(int64_t world) { return static_cast<int>(world / 2 + 3); }

std::vector<int64_t> ShapeOf(int64_t world) {
  const int64_t a = int64_t{1} << (Log2(world) / 2);
  return {a, world / a};
}

struct World {
  std::shared_ptr<MeshRuntime> runtime;
  std::vector<int64_t> shape;
};

absl::StatusOr<World> MakeWorld(int64_t world) {
  auto runtime = MeshRuntime::Create(std::make_shared<InMemoryStore>(),
                                     RankOf(world), static_cast<int>(world), 0);
  if (!runtime.ok()) return runtime.status();
  // One rank of a world that exists only as a layout: nothing to agree with.
  (*runtime)->SkipMeshAgreementForTesting();
  return World{*runtime, ShapeOf(world)};
}

absl::StatusOr<DeviceMesh> Build(const World& w) {
  return InitDeviceMesh(w.runtime, "cpu", w.shape, {"dp", "tp"});
}

// One call of an operation (not "build") on `m`.
using OpCall = absl::Status (*)(const DeviceMesh& m);

// `op`'s call, chosen once so that the timed loops time the call itself.
absl::StatusOr<OpCall> CallOf(const std::string& op) {
  if (op == "slice") {
    return [](const DeviceMesh& m) { return m.Slice({"dp"}).status(); };
  }
  if (op == "flatten") {
    return [](const DeviceMesh& m) { return m.Flatten().status(); };
  }
  if (op == "get_coordinate") {
    return [](const DeviceMesh& m) {
      return m.GetCoordinate().has_value()
                 ? absl::OkStatus()
                 : absl::InternalError("rank not in its own mesh");
    };
  }
  if (op == "get_local_rank") {
    return [](const DeviceMesh& m) { return m.GetLocalRank("tp").status(); };
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown operation ", op));
}

absl::Status TimeOp(const World& w, int64_t world, const std::string& op,
                    int samples, int calls) {
  std::vector<double> first, repeat;
  for (int s = 0; s < samples; ++s) {
    if (op == "build") {
      auto t0 = Clock::now();
      auto m = Build(w);
      auto t1 = Clock::now();
      if (!m.ok()) return m.status();
      first.push_back(Ns(t0, t1));
      std::vector<DeviceMesh> keep;
      keep.reserve(calls);
      auto t2 = Clock::now();
      for (int c = 0; c < calls; ++c) {
        auto again = Build(w);
        if (!again.ok()) return again.status();
        keep.push_back(*std::move(again));
      }
      auto t3 = Clock::now();
      repeat.push_back(Ns(t2, t3) / calls);
      continue;
    }
    absl::StatusOr<OpCall> call = CallOf(op);
    if (!call.ok()) return call.status();
    auto m = Build(w);  // a fresh root
    if (!m.ok()) return m.status();
    auto t0 = Clock::now();
    absl::Status st = (*call)(*m);
    auto t1 = Clock::now();
    if (!st.ok()) return st;
    first.push_back(Ns(t0, t1));
    auto t2 = Clock::now();
    for (int c = 0; c < calls; ++c) {
      if (absl::Status s2 = (*call)(*m); !s2.ok()) return s2;
    }
    auto t3 = Clock::now();
    repeat.push_back(Ns(t2, t3) / calls);
  }
  std::printf(
      "PEER_BENCH_LAYOUT {\"op\":\"%s\",\"world\":%lld,\"first_ns\":%.1f,"
      "\"repeat_ns\":%.1f}\n",
      op.c_str(), static_cast<long long>(world), Median(first), Median(repeat));
  std::fflush(stdout);
  return absl::OkStatus();
}

int64_t HeapBytes() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

int64_t RssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int64_t kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(
                             absl::StripPrefix(line, "VmRSS:"), "kB")),
                         &kib)) {
      return kib * 1024;
    }
  }
  return -1;
}

absl::Status Memory(int64_t world) {
  auto w = MakeWorld(world);
  if (!w.ok()) return w.status();
  // One-time set-up (first allocations, lazy statics) out of the figure, as
  // torch_layout.py builds a small mesh first. Kept alive: freed chunks
  // would sit in glibc's tcache, which mallinfo2 counts as in use, and the
  // mesh measured would reuse them unseen.
  auto small_world = MakeWorld(8);
  if (!small_world.ok()) return small_world.status();
  auto small = Build(*small_world);
  if (!small.ok()) return small.status();
  const int64_t heap0 = HeapBytes(), rss0 = RssBytes();
  auto m = Build(*w);
  const int64_t heap1 = HeapBytes(), rss1 = RssBytes();
  if (!m.ok()) return m.status();
  std::printf(
      "PEER_BENCH_MEMORY {\"world\":%lld,\"heap_bytes\":%lld,"
      "\"rss_bytes\":%lld}\n",
      static_cast<long long>(world), static_cast<long long>(heap1 - heap0),
      static_cast<long long>(rss1 - rss0));
  std::fflush(stdout);
  return absl::OkStatus();
}

int Run() {
  std::vector<int64_t> worlds;
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_worlds), ',')) {
    int64_t w = 0;
    if (!absl::SimpleAtoi(text, &w) || w < 8 || w > (int64_t{1} << 30) ||
        (w & (w - 1)) != 0) {
      std::fprintf(stderr,
                   "mesh_ops_peer: --worlds: '%s' is not a power of two in "
                   "[8, 2^30]\n",
                   std::string(text).c_str());
      return 2;
    }
    worlds.push_back(w);
  }
  const int samples = absl::GetFlag(FLAGS_samples);
  const int calls = absl::GetFlag(FLAGS_calls);
  if (samples < 1 || calls < 1) {
    std::fprintf(stderr, "mesh_ops_peer: --samples and --calls must be >= 1\n");
    return 2;
  }
  // Memory first, on a heap that no timing loop has grown yet.
  if (absl::Status s = Memory(*std::max_element(worlds.begin(), worlds.end()));
      !s.ok()) {
    std::fprintf(stderr, "mesh_ops_peer: memory: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int64_t world : worlds) {
    auto w = MakeWorld(world);
    if (!w.ok()) {
      std::fprintf(stderr, "mesh_ops_peer: %s\n", w.status().ToString().c_str());
      return 1;
    }
    for (const char* op : {"build", "slice", "flatten", "get_coordinate",
                           "get_local_rank"}) {
      if (absl::Status s = TimeOp(*w, world, op, samples, calls); !s.ok()) {
        std::fprintf(stderr, "mesh_ops_peer: %s at %lld: %s\n", op,
                     static_cast<long long>(world), s.ToString().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return devmesh::Run();
}
