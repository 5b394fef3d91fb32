// devmesh/bootstrap/testing/multiprocess.h
// -----------------------------------------------------------------------------
// RunRanks: run a test body in `nproc` real processes that share a devmesh
// store, for multi-process tests of other packages (Gloo groups, meshes).
//
//   TEST(MyTest, AllReduce) {
//     absl::Status s = devmesh::testing::RunRanks(4, [](devmesh::Bootstrap& b)
//         -> absl::Status {
//       ... build a communicator over b.store(), check results ...
//       if (got != want) return absl::InternalError(absl::StrCat("got ", got));
//       return absl::OkStatus();
//     });
//     EXPECT_TRUE(s.ok()) << s;
//   }
//
// How: the parent binds a loopback listening socket on port 0, forks the
// children (so call it from the test's main thread, before the test starts
// any threads of its own), and only then starts a TcpStoreServer on that
// socket: the parent hosts the store, so there is no port race and no rank-0
// special case. Each child builds a Bootstrap (rank r of nproc, local_rank r,
// host_server = false), runs `body`, and exits 0 on OK; otherwise it prints
// the status to stderr and reports it to the parent. gtest assertions inside
// `body` do NOT reach the parent: return a Status instead.
//
// Errors: OK when every rank's body returned OK. Otherwise the code of the
// first failing rank's status (DeadlineExceeded when a rank had to be killed
// at `timeout`, Internal for a crash or a non-zero exit), with a message
// naming every failing rank and its message / exit code / signal.
// InvalidArgument for nproc < 1.
//
// Thread-safety: call from one thread; it forks.
#ifndef DEVMESH_BOOTSTRAP_TESTING_MULTIPROCESS_H_
#define DEVMESH_BOOTSTRAP_TESTING_MULTIPROCESS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bootstrap/bootstrap.h"

namespace devmesh {
namespace testing {

// What one rank did.
struct RankOutcome {
  int rank = 0;
  absl::Status status;  // the body's (or Bootstrap::Create's) status
  // False when the process ended without reporting a status (it crashed,
  // was killed, or left on purpose with _exit); `exit_code` then tells how.
  bool reported = false;
  int exit_code = -1;  // the exit status when it exited normally, else -1
};

// Options beyond the common case.
struct RunRanksOptions {
  absl::Duration timeout = absl::Seconds(60);  // for the whole run
  std::string token;                           // the store token
  // Passed to each rank's Bootstrap (timeout: Get/Wait/Barrier default).
  absl::Duration bootstrap_timeout = absl::Seconds(30);
  // true: rank 0's Bootstrap hosts the store (host_server, on the socket the
  // parent bound, handed over as //bootstrap:launch does), as in a job
  // without an external store, so that a test can kill the store with rank
  // 0; the parent then hosts nothing. false: the parent hosts it.
  bool rank0_hosts_store = false;
  // Not empty: every rank joins the store at this address instead
  // (UseStoreAddress's forms, "etcd://127.0.0.1:2379/job/" for an etcd that
  // the test started); the parent's store is then unused.
  std::string store_address;
};

// Runs `body` on every rank; returns one outcome per rank, in rank order.
std::vector<RankOutcome> RunRanksDetailed(
    int nproc, const std::function<absl::Status(Bootstrap&)>& body,
    const RunRanksOptions& options);

// As above, summarised into one Status (see the header comment).
absl::Status RunRanks(int nproc,
                      const std::function<absl::Status(Bootstrap&)>& body,
                      absl::Duration timeout = absl::Seconds(60));

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_BOOTSTRAP_TESTING_MULTIPROCESS_H_
