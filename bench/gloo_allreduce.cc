// devmesh/bench/gloo_allreduce.cc
// -----------------------------------------------------------------------------
// Raw Gloo all-reduce (no mesh): the baseline that //bench:allreduce_2d
// compares against. For each world size in --ranks, forks that many local
// processes that rendezvous through a TcpStoreServer hosted by this process,
// builds one Gloo context per rank (through devmesh's Gloo backend, which
// only sets up the connections) and then calls gloo::allreduce directly,
// float32 sum, out-of-place, over message sizes --min_bytes .. --max_bytes
// (doubling). Reports per size, as nccl-tests does:
//   time  = the slowest rank's mean time per all-reduce,
//   algbw = bytes / time,   busbw = algbw * 2 * (n - 1) / n,
//   wrong = elements differing from the exact sum n(n+1)/2 after the last
//           iteration (inputs are rank + 1).
// A plain table printer (the brief allows it): every rank must take part in
// every iteration, which Google Benchmark's adaptive iteration count in one
// process cannot arrange.
//
//   bazel run -c opt //bench:gloo_allreduce -- --ranks=2,4
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/registry.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"

ABSL_FLAG(std::string, ranks, "2,4", "comma-separated world sizes");
ABSL_FLAG(int64_t, min_bytes, 1024, "smallest message, bytes");
ABSL_FLAG(int64_t, max_bytes, 64 << 20, "largest message, bytes");
ABSL_FLAG(int64_t, bytes_per_size, 256 << 20,
          "iterations per size = this / message bytes, clamped to [3, 200]");
ABSL_FLAG(int, warmup, 3, "untimed iterations per size");
ABSL_FLAG(bool, via_communicator, false,
          "call devmesh's Communicator::AllReduce (out-of-place, float32 "
          "sum) instead of gloo::allreduce directly: the cost of //comm's "
          "Gloo path over the same connections");

namespace devmesh {
namespace {

int RunRank(int rank, int size, int port) {
  TcpStoreClientOptions store_options;
  store_options.port = port;
  auto client = TcpStoreClient::Connect(store_options);
  if (!client.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, client.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<Store> store(std::move(*client));
  auto comm = CreateCommunicator("gloo", store, rank, size);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
    return 1;
  }
  auto* gloo_comm = dynamic_cast<GlooCommunicator*>(comm->get());
  const std::shared_ptr<::gloo::Context>& context = gloo_comm->context();
  const size_t max_elems = absl::GetFlag(FLAGS_max_bytes) / sizeof(float);
  std::vector<float> in(max_elems, static_cast<float>(rank + 1));
  std::vector<float> out(max_elems, 0.0f);
  const float expected = static_cast<float>(size * (size + 1) / 2);
  if (rank == 0) {
    std::printf("# %s all-reduce, float32 sum, %d ranks (processes) on one host\n",
                absl::GetFlag(FLAGS_via_communicator) ? "devmesh Communicator (gloo)" : "gloo", size);
    std::printf("%12s %8s %12s %12s %12s %8s\n", "bytes", "iters", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "wrong");
  }
  for (int64_t bytes = absl::GetFlag(FLAGS_min_bytes);
       bytes <= absl::GetFlag(FLAGS_max_bytes); bytes *= 2) {
    const size_t elems = bytes / sizeof(float);
    const int iters = static_cast<int>(std::clamp<int64_t>(
        absl::GetFlag(FLAGS_bytes_per_size) / bytes, 3, 200));
    const bool via_comm = absl::GetFlag(FLAGS_via_communicator);
    auto run_once = [&] {
      if (via_comm) {
        absl::Status s = (*comm)->AllReduce(in.data(), out.data(), elems,
                                            DataType::kFloat32, ReduceOp::kSum);
        if (!s.ok()) {
          std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
          std::exit(1);
        }
        return;
      }
      ::gloo::AllreduceOptions opts(context);
      opts.setInput<float>(in.data(), elems);
      opts.setOutput<float>(out.data(), elems);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &::gloo::sum<float>));
      ::gloo::allreduce(opts);
    };
    for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) run_once();
    if (!(*comm)->Barrier().ok()) return 1;
    const absl::Time start = absl::Now();
    for (int i = 0; i < iters; ++i) run_once();
    double seconds = absl::ToDoubleSeconds(absl::Now() - start) / iters;
    int64_t wrong = 0;
    for (size_t i = 0; i < elems; ++i) wrong += out[i] != expected;
    // The slowest rank's time and the total wrong count.
    if (!(*comm)->AllReduce(&seconds, &seconds, 1, DataType::kFloat64,
                            ReduceOp::kMax).ok() ||
        !(*comm)->AllReduce(&wrong, &wrong, 1, DataType::kInt64,
                            ReduceOp::kSum).ok()) {
      return 1;
    }
    if (rank == 0) {
      const double algbw = bytes / seconds / 1e9;
      const double busbw = algbw * 2.0 * (size - 1) / size;
      std::printf("%12lld %8d %12.1f %12.3f %12.3f %8lld\n",
                  static_cast<long long>(bytes), iters, seconds * 1e6, algbw,
                  busbw, static_cast<long long>(wrong));
      std::fflush(stdout);
    }
  }
  return 0;
}

int RunWorld(int size) {
  // Fork before the store server's thread starts (a child must not inherit
  // a running thread's locks); each child reads the port from a pipe.
  std::fflush(stdout);
  std::vector<pid_t> pids;
  std::vector<int> port_fds;
  for (int rank = 0; rank < size; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      for (int fd : port_fds) close(fd);
      int port = 0;
      if (read(fds[0], &port, sizeof(port)) != sizeof(port) || port <= 0) {
        _exit(1);
      }
      _exit(RunRank(rank, size, port));
    }
    close(fds[0]);
    pids.push_back(pid);
    port_fds.push_back(fds[1]);
  }
  TcpStoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  auto server = TcpStoreServer::Start(server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
  }
  const int port = server.ok() ? (*server)->port() : 0;
  for (int fd : port_fds) {
    if (write(fd, &port, sizeof(port)) != sizeof(port)) {
      std::fprintf(stderr, "could not pass the port to a rank\n");
    }
    close(fd);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  int status = 0;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',', absl::SkipEmpty())) {
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size < 1) {
      std::fprintf(stderr, "--ranks: \"%.*s\" is not a positive integer\n",
                   static_cast<int>(part.size()), part.data());
      return 2;
    }
    status |= devmesh::RunWorld(size);
    std::printf("\n");
  }
  return status;
}
