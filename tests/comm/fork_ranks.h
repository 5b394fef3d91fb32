// devmesh/tests/comm/fork_ranks.h
// -----------------------------------------------------------------------------
// Test helper (testonly): runs `nproc` ranks as real processes through
// //bootstrap:multiprocess_testing (RunRanks: the parent hosts the TCP store)
// and gives each body (rank, size, store).
//
// A child that exits with code 0 without reporting (a test's deliberately
// dying peer calls _exit(0)) counts as OK. Past `timeout` every child still
// running is killed and its rank is reported as DeadlineExceeded.
// Call from a single-threaded test: the children are forked before the
// store server thread starts.
#ifndef DEVMESH_TESTS_COMM_FORK_RANKS_H_
#define DEVMESH_TESTS_COMM_FORK_RANKS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace devmesh {
namespace testing {

using RankBody =
    std::function<absl::Status(int rank, int size, std::shared_ptr<Store>)>;

// OK when every rank's body returned OK; else the first failures, each
// prefixed with "rank N: ".
// Rank `rank` of a world communicator of `size` on `backend` over `store`,
// with `timeout`; Internal when the registry made another backend.
absl::StatusOr<std::unique_ptr<Communicator>> WorldOf(
    const std::string& backend, int rank, int size,
    std::shared_ptr<Store> store, absl::Duration timeout = absl::Seconds(60));

absl::Status ForkRanks(int nproc, const RankBody& body,
                       absl::Duration timeout = absl::Seconds(120));

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_COMM_FORK_RANKS_H_
