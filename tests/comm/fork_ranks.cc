#include "tests/comm/fork_ranks.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/registry.h"

namespace devmesh {
namespace testing {

absl::Status ForkRanks(int nproc, const RankBody& body,
                       absl::Duration timeout) {
  RunRanksOptions options;
  options.timeout = timeout;
  options.bootstrap_timeout = timeout;
  std::vector<RankOutcome> outcomes = RunRanksDetailed(
      nproc,
      [&body](Bootstrap& b) {
        return body(b.rank(), b.world_size(), b.store());
      },
      options);
  std::vector<std::string> failures;
  for (const RankOutcome& o : outcomes) {
    // A rank that leaves on purpose with _exit(0) (a test's dying peer)
    // reports nothing and counts as OK.
    if (o.status.ok() || (!o.reported && o.exit_code == 0)) continue;
    failures.push_back(absl::StrCat("rank ", o.rank, ": ", o.status.ToString()));
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrJoin(failures, "; "));
}

absl::StatusOr<std::unique_ptr<Communicator>> WorldOf(
    const std::string& backend, int rank, int size,
    std::shared_ptr<Store> store, absl::Duration timeout) {
  CommOptions options;
  options.timeout = timeout;
  auto comm =
      CreateCommunicator(backend, std::move(store), rank, size, options);
  if (comm.ok() && (*comm)->backend() != backend) {
    return absl::InternalError(
        absl::StrCat("asked for ", backend, ", got ", (*comm)->backend()));
  }
  return comm;
}

}  // namespace testing
}  // namespace devmesh
