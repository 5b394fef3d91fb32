// devmesh/bench/server_process.h
// -----------------------------------------------------------------------------
// //store:server in a child process, for the store benchmarks
// (//bench:store_ops, //bench:rendezvous_scale): started on a free loopback
// port, it dies with the benchmark (PR_SET_PDEATHSIG) and is stopped with
// SIGTERM. And the benchmarks' store clients.
//
// Thread-safety: call from main before the benchmark starts threads (it
// forks).
#ifndef DEVMESH_BENCH_SERVER_PROCESS_H_
#define DEVMESH_BENCH_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace devmesh::bench {

struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
};

// //store:server as a data dependency of the calling binary: in its runfiles
// tree (bazel run, or the binary run from bazel-bin), else beside its package
// in bazel-bin. Empty when none is there.
std::string FindServerBinary();

// Starts FindServerBinary() with --port=0 --bind=`bind` and reads the port
// from its "listening on" line. Errors: NotFound (no server binary),
// Internal (fork failed, or it did not print its address).
absl::StatusOr<ServerProcess> StartServerProcess(
    const std::string& bind = "127.0.0.1");

// SIGTERM, then waits for it. No effect on pid <= 0.
void StopServerProcess(ServerProcess& server);

// A client of the store at host:port: TcpStoreClient, or C10dStoreClient
// when `c10d`; connect timeout 60 s, default timeout 120 s. Errors: those of
// the client's Connect.
absl::StatusOr<std::unique_ptr<Store>> ConnectBenchClient(
    const std::string& host, int port, bool c10d);

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_SERVER_PROCESS_H_
