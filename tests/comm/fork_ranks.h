// devmesh/tests/comm/fork_ranks.h
// -----------------------------------------------------------------------------
// Test helper (testonly): runs `nproc` ranks as real processes. The parent
// hosts a TcpStoreServer on 127.0.0.1; each forked child connects a
// TcpStoreClient, runs `body(rank, nproc, store)` and reports its Status
// through a pipe. Written here because //bootstrap:multiprocess_testing had
// not landed when //tests/comm was written; switch when it does.
//
// A child that exits with code 0 without reporting (a test's deliberately
// dying peer calls _exit(0)) counts as OK. Past `timeout` every child still
// running is killed and the result is DeadlineExceeded naming them.
// Call from a single-threaded test: the children are forked before the
// store server thread starts.
#ifndef DEVMESH_TESTS_COMM_FORK_RANKS_H_
#define DEVMESH_TESTS_COMM_FORK_RANKS_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bootstrap/store.h"

namespace devmesh {
namespace testing {

using RankBody =
    std::function<absl::Status(int rank, int size, std::shared_ptr<Store>)>;

// OK when every rank's body returned OK; else the first failures, each
// prefixed with "rank N: ".
absl::Status ForkRanks(int nproc, const RankBody& body,
                       absl::Duration timeout = absl::Seconds(120));

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_COMM_FORK_RANKS_H_
