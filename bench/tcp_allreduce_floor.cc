// devmesh/bench/tcp_allreduce_floor.cc
// -----------------------------------------------------------------------------
// The floor under any 2-member all-reduce over TCP: the fewest bytes, the
// fewest copies and the one reduction such an all-reduce needs, with no
// library in the way. tools/cross_host_bench.sh runs it beside devmesh and
// PyTorch, with the same placement, as its floor_us column.
//
// Started as the 4 ranks of tools/launcher_check/by_hand.sh (RANK and
// LOCAL_RANK from the environment; ranks 0-1 on host 1, 2-3 on host 2), it
// pairs rank r with rank r + 2 over one TCP connection (TCP_NODELAY, the
// kernel's buffer sizes: what Gloo and UCX's tcp transport get), each rank
// bound to core LOCAL_RANK as allreduce_2d binds itself: the pairs are the
// 2x2 mesh's dp groups and run at the same time, as dp's groups do there.
// One all-reduce of n float32 bytes is a reduce-scatter and an all-gather of
// two halves (each member sends n and receives n bytes, the least any
// all-reduce of 2 members moves), both directions at once on a non-blocking
// socket, the partner's half summed into this member's half in 256 KiB
// pieces as they arrive (the same reduce function as devmesh's CPU
// backends), the reduced halves received in place. Nothing a real
// all-reduce needs beyond that: no headers, no tags, no call check, no
// progress engine.
//
// Measured as allreduce_2d and torch_allreduce.py measure: per size, --warmup
// untimed all-reduces, then --iters runs of clamp(ceil(8 MiB / bytes), 1,
// 100) back-to-back all-reduces, each run started by a 1-byte exchange of
// the pair; a run's time is the slower member's; the median run / batch.
// Each run also takes both members' CPU time (user and system, this
// thread's, CLOCK_THREAD_CPUTIME_ID): the pair shares one core, so no
// all-reduce of the pair that does at least this work can take less wall
// time than its pair_cpu_seconds, whatever it overlaps. Rank 0 and rank 1
// (one per pair) print one line per size (medians over runs, per
// all-reduce):
//   TCP_FLOOR {"pair": P, "bytes": N, "seconds": S, "pair_cpu_seconds": C,
//              "wrong": W}
// W counts the elements of both members that differ from the exact sum
// after the last run (the pattern's sums are exact in float32).
//
//   tcp_allreduce_floor --peer_host=ADDR_OF_HOST_2 [--port=29650]
//       [--sizes=1024,262144] [--iters=10] [--warmup=3]
// Exit status 0 when every element was right, 1 otherwise or on a socket
// error (the message names the call), 2 for bad flags.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "comm/reduce_functions.h"

ABSL_FLAG(std::string, peer_host, "",
          "IPv4 address of host 2 (where ranks 2 and 3 listen)");
ABSL_FLAG(int, port, 29650, "ranks 2 and 3 listen on port + LOCAL_RANK");
ABSL_FLAG(std::string, sizes, "1024,262144", "message sizes in bytes");
ABSL_FLAG(int, iters, 10, "timed runs per size");
ABSL_FLAG(int, warmup, 3, "untimed all-reduces per size");

namespace {

constexpr size_t kPiece = size_t{256} << 10;  // reduce granularity

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "tcp_allreduce_floor: %s: %s\n", what,
               std::strerror(errno));
  std::exit(1);
}

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  int out = 0;
  if (v == nullptr || !absl::SimpleAtoi(v, &out)) {
    std::fprintf(stderr, "tcp_allreduce_floor: %s is not set (run it under "
                 "tools/launcher_check/by_hand.sh)\n", name);
    std::exit(2);
  }
  return out;
}

int Connect(bool listen_side, const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int fd = -1;
  if (listen_side) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) Die("socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Die("bind");
    }
    if (listen(ls, 1) != 0) Die("listen");
    fd = accept(ls, nullptr, nullptr);
    if (fd < 0) Die("accept");
    close(ls);
  } else {
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
      std::fprintf(stderr, "tcp_allreduce_floor: --peer_host='%s' is not an "
                   "IPv4 address\n", host.c_str());
      std::exit(2);
    }
    for (int attempt = 0;; ++attempt) {  // the listener may not be up yet
      fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) Die("socket");
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
        break;
      }
      close(fd);
      if (attempt == 3000) Die("connect (30 s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Sends `out` and receives `in` at once. on_received(offset, bytes) is
// called for each newly received stretch, in order.
template <typename OnReceived>
void Exchange(int fd, const char* out, size_t out_bytes, char* in,
              size_t in_bytes, OnReceived on_received) {
  size_t sent = 0, got = 0;
  while (sent < out_bytes || got < in_bytes) {
    if (sent < out_bytes) {
      ssize_t n = send(fd, out + sent, out_bytes - sent,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR) Die("send");
    }
    if (got < in_bytes) {
      ssize_t n = recv(fd, in + got, in_bytes - got, MSG_DONTWAIT);
      if (n > 0) {
        on_received(got, static_cast<size_t>(n));
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        errno = ECONNRESET;
        Die("recv (the peer closed)");
      } else if (errno != EAGAIN && errno != EINTR) {
        Die("recv");
      }
    }
    if (sent < out_bytes || got < in_bytes) {
      pollfd p{fd, static_cast<short>((sent < out_bytes ? POLLOUT : 0) |
                                      (got < in_bytes ? POLLIN : 0)), 0};
      poll(&p, 1, 1000);
    }
  }
}

// This thread's CPU time in seconds, user and system together (the kernel
// keeps the sum exactly; its split between the two is sampled at the tick).
double ThreadCpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int rank = EnvInt("RANK");
  const int local_rank = EnvInt("LOCAL_RANK");
  const bool host2 = rank >= 2;
  std::vector<size_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    size_t b = 0;
    if (!absl::SimpleAtoi(s, &b) || b < 8 || b % 8 != 0) {
      std::fprintf(stderr, "tcp_allreduce_floor: size '%s' is not a multiple "
                   "of 8 bytes >= 8\n", std::string(s).c_str());
      return 2;
    }
    sizes.push_back(b);
  }
  if (!host2 && absl::GetFlag(FLAGS_peer_host).empty()) {
    std::fprintf(stderr, "tcp_allreduce_floor: --peer_host is required\n");
    return 2;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(local_rank, &cpus);
  sched_setaffinity(0, sizeof(cpus), &cpus);  // as allreduce_2d binds

  const int fd = Connect(host2, absl::GetFlag(FLAGS_peer_host),
                         absl::GetFlag(FLAGS_port) + local_rank);
  auto sum = devmesh::reduce_internal::GetReduceFunction(
      devmesh::DataType::kFloat32, devmesh::ReduceOp::kSum);
  int wrong_total = 0;
  for (size_t bytes : sizes) {
    const size_t count = bytes / 4;
    const size_t half = count / 2;  // host 1's member owns [0, half)
    const size_t mine_begin = host2 ? half : 0;
    const size_t mine_count = host2 ? count - half : half;
    const size_t theirs_begin = host2 ? 0 : half;
    const size_t theirs_count = count - mine_count;
    std::vector<float> data(count), scratch(mine_count);
    auto fill = [&] {
      for (size_t i = 0; i < count; ++i) {
        data[i] = static_cast<float>((rank + 1) * (1 + i % 13));
      }
    };
    auto all_reduce = [&] {
      char* scratch_bytes = reinterpret_cast<char*>(scratch.data());
      size_t reduced = 0;  // elements of scratch summed into data
      Exchange(fd, reinterpret_cast<const char*>(data.data() + theirs_begin),
               theirs_count * 4, scratch_bytes, mine_count * 4,
               [&](size_t offset, size_t n) {
                 const size_t have = (offset + n) / 4;
                 if (have - reduced < kPiece / 4 && have != mine_count) return;
                 float* mine = data.data() + mine_begin;
                 sum(mine + reduced, mine + reduced, scratch.data() + reduced,
                     have - reduced);
                 reduced = have;
               });
      Exchange(fd, reinterpret_cast<const char*>(data.data() + mine_begin),
               mine_count * 4,
               reinterpret_cast<char*>(data.data() + theirs_begin),
               theirs_count * 4, [](size_t, size_t) {});
    };
    auto pair_sync = [&] {
      char out = 1, in = 0;
      Exchange(fd, &out, 1, &in, 1, [](size_t, size_t) {});
    };
    const int batch = static_cast<int>(std::clamp<size_t>(
        ((size_t{8} << 20) + bytes - 1) / bytes, 1, 100));
    fill();
    for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) all_reduce();
    std::vector<double> runs, cpu;
    for (int it = 0; it < absl::GetFlag(FLAGS_iters); ++it) {
      fill();
      pair_sync();
      const auto cpu_start = ThreadCpu();
      const auto start = std::chrono::steady_clock::now();
      for (int b = 0; b < batch; ++b) all_reduce();
      const auto cpu_end = ThreadCpu();
      double mine[2] = {std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count(),
                        cpu_end - cpu_start};
      double theirs[2] = {0, 0};
      Exchange(fd, reinterpret_cast<const char*>(mine), sizeof(mine),
               reinterpret_cast<char*>(theirs), sizeof(theirs),
               [](size_t, size_t) {});
      runs.push_back(std::max(mine[0], theirs[0]) / batch);
      cpu.push_back((mine[1] + theirs[1]) / batch);
      if (it + 1 < absl::GetFlag(FLAGS_iters)) continue;
      // The last run's result: the batch's sums of the pattern are exact.
      int wrong = 0;
      fill();
      all_reduce();
      for (size_t i = 0; i < count; ++i) {
        // Pair p holds ranks p and p + 2: values (p + 1) and (p + 3) times
        // the pattern.
        const int p = rank % 2;
        if (data[i] != static_cast<float>((2 * p + 4) * (1 + i % 13))) ++wrong;
      }
      int theirs_wrong = 0;
      Exchange(fd, reinterpret_cast<const char*>(&wrong), sizeof(wrong),
               reinterpret_cast<char*>(&theirs_wrong), sizeof(theirs_wrong),
               [](size_t, size_t) {});
      wrong += theirs_wrong;
      wrong_total += wrong;
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      if (!host2) {
        std::printf("TCP_FLOOR {\"pair\": %d, \"bytes\": %zu, \"seconds\": "
                    "%.9f, \"pair_cpu_seconds\": %.9f, \"wrong\": %d}\n",
                    local_rank, bytes, median(runs), median(cpu), wrong);
        std::fflush(stdout);
      }
    }
  }
  close(fd);
  return wrong_total == 0 ? 0 : 1;
}
