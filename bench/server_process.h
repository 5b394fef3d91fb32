// devmesh/bench/server_process.h
// -----------------------------------------------------------------------------
// What the store benchmarks (//bench:store_ops, //bench:rendezvous_scale)
// share: //store:server in a child process, started on a free port, dying
// with the benchmark (PR_SET_PDEATHSIG) and stopped with SIGTERM; and their
// store clients.
#ifndef DEVMESH_BENCH_SERVER_PROCESS_H_
#define DEVMESH_BENCH_SERVER_PROCESS_H_

#include <stdio.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace devmesh::bench {

// A running //store:server.
struct ServerProcess {
  pid_t pid = -1;         // -1: none
  int port = 0;           // the port it listens on
  FILE* out = nullptr;    // its stdout (closed by StopServerProcess)
};

// //store:server as a data dependency of the calling binary: in its runfiles
// tree (bazel run, or the binary run from bazel-bin), else beside its package
// in bazel-bin. Empty when none is there. Any thread.
std::string FindServerBinary();

// Starts FindServerBinary() with --port=0 --bind=`bind` and reads the port
// from its "listening on" line, waiting at most 30 s. Errors: NotFound (no
// server binary), Internal (pipe or fork failed, or it did not print its
// address in time: it is killed then). Call it while the process has one
// thread (it forks).
absl::StatusOr<ServerProcess> StartServerProcess(
    const std::string& bind = "127.0.0.1");

// SIGTERM, then waits for it (SIGKILL after 10 s); closes its stdout.
// Returns whether it exited with status 0 (true for no process). Any thread.
bool StopServerProcess(ServerProcess& server);

// A client of the store at host:port: TcpStoreClient, or C10dStoreClient
// when `c10d`; connect timeout 60 s, default timeout 120 s. Errors: those of
// the client's Connect. Any thread.
absl::StatusOr<std::unique_ptr<Store>> ConnectBenchClient(
    const std::string& host, int port, bool c10d);

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_SERVER_PROCESS_H_
