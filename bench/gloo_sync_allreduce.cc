// devmesh/bench/gloo_sync_allreduce.cc
// -----------------------------------------------------------------------------
// A measurement for issue 18's "fastest Gloo route": the per-dim all-reduce
// of a 2x2 mesh through Gloo's Buffer-based AllreduceBcube with synchronous
// pairs (Pair::setSync(true, false): the calling thread reads its socket,
// blocking, instead of Gloo's event loop), or with Gloo's default
// asynchronous pairs (--sync=false), on raw Gloo contexts, no devmesh. One
// process per rank, started by hand with RANK, WORLD_SIZE=4 and a shared
// directory for Gloo's FileStore:
//
//   b=bazel-bin/bench/gloo_sync_allreduce
//   for r in 0 1 2 3; do
//     RANK=$r WORLD_SIZE=4 taskset -c $((r % 2)) $b --store_dir=/tmp/gs &
//   done; wait
//
// The mesh is row-major: dp groups {0,2} {1,3}, tp groups {0,1} {2,3}; both
// groups of a dim run at once. Per dim and size, after --warmup runs, each
// of --iters runs is clamp(ceil(8 MiB / bytes), 1, 100) back-to-back
// all-reduces (float32 sum) right after a barrier on a world context of
// asynchronous pairs; rank 0 prints the median over runs of its run time /
// batch, in us, and the sum check of the last result. Exit status 1 on a
// wrong sum or a Gloo error, 2 on bad arguments.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/batch_size.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

ABSL_FLAG(std::string, store_dir, "", "directory shared by every rank");
ABSL_FLAG(std::string, sizes, "1024,16384,262144,1048576", "bytes");
ABSL_FLAG(bool, sync, true, "synchronous pairs for the groups under test");
ABSL_FLAG(int, iters, 10, "timed runs per dim and size");
ABSL_FLAG(int, warmup, 3, "untimed runs per dim and size");
ABSL_FLAG(std::string, hostname, "127.0.0.1", "this rank's address");

namespace {

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  int out = -1;
  if (v == nullptr || !absl::SimpleAtoi(v, &out)) return -1;
  return out;
}

std::shared_ptr<gloo::rendezvous::Context> Connect(
    gloo::rendezvous::Store& store, const std::string& prefix, int rank,
    int size, std::shared_ptr<gloo::transport::Device>& device) {
  gloo::rendezvous::PrefixStore prefixed(prefix, store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(60));
  context->connectFullMesh(prefixed, device);
  return context;
}

int Run() {
  const int rank = EnvInt("RANK");
  const int world = EnvInt("WORLD_SIZE");
  const std::string dir = absl::GetFlag(FLAGS_store_dir);
  if (rank < 0 || world != 4 || dir.empty()) {
    std::fprintf(stderr, "gloo_sync_allreduce: needs RANK, WORLD_SIZE=4 and "
                         "--store_dir\n");
    return 2;
  }
  std::vector<long> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    long v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 4) return 2;
    sizes.push_back(v);
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = absl::GetFlag(FLAGS_hostname);
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto all = Connect(store, "world", rank, world, device);
  // dp: coordinate 0 varies (rank / 2); tp: coordinate 1 (rank % 2).
  struct Dim {
    const char* name;
    std::shared_ptr<gloo::rendezvous::Context> context;
    std::vector<int> members;
  };
  std::vector<Dim> dims;
  dims.push_back({"dp", Connect(store, "dp" + std::to_string(rank % 2),
                                rank / 2, 2, device),
                  {rank % 2, rank % 2 + 2}});
  dims.push_back({"tp", Connect(store, "tp" + std::to_string(rank / 2),
                                rank % 2, 2, device),
                  {2 * (rank / 2), 2 * (rank / 2) + 1}});
  if (absl::GetFlag(FLAGS_sync)) {
    for (Dim& d : dims) {
      for (int i = 0; i < d.context->size; ++i) {
        if (i != d.context->rank) d.context->getPair(i)->setSync(true, false);
      }
    }
  }
  gloo::BarrierAllToAll barrier(all);
  int wrong = 0;
  for (long bytes : sizes) {
    const int count = static_cast<int>(bytes / 4);
    const int batch = devmesh::BatchSize(static_cast<size_t>(bytes));
    for (Dim& d : dims) {
      std::vector<float> buf(count, 0.0f);
      gloo::AllreduceBcube<float> op(d.context, {buf.data()}, count);
      std::vector<double> per_call;
      for (int it = 0; it < absl::GetFlag(FLAGS_warmup) +
                                absl::GetFlag(FLAGS_iters);
           ++it) {
        barrier.run();
        const auto t0 = std::chrono::steady_clock::now();
        for (int b = 0; b < batch; ++b) op.run();
        const double s = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
        if (it >= absl::GetFlag(FLAGS_warmup)) per_call.push_back(s / batch);
      }
      // Exact check: every element of member m holds m + 1.
      std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
      op.run();
      const float want = static_cast<float>(d.members[0] + d.members[1] + 2);
      for (float x : buf) wrong += x != want;
      std::sort(per_call.begin(), per_call.end());
      if (rank == 0) {
        std::printf("%s %ld %.1f\n", d.name, bytes,
                    per_call[per_call.size() / 2] * 1e6);
        std::fflush(stdout);
      }
    }
  }
  barrier.run();
  if (wrong != 0) {
    std::fprintf(stderr, "rank %d: %d wrong elements\n", rank, wrong);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  try {
    return Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_sync_allreduce: %s\n", e.what());
    return 1;
  }
}
