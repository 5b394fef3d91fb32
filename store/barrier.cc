#include "store/barrier.h"

#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {

absl::Status Barrier(Store& store, std::string name, int rank, int world_size,
                     absl::Duration timeout) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier '", name, "': world_size ", world_size,
                     " is not positive"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier '", name, "': rank ", rank, " is outside [0, ",
                     world_size, ")"));
  }
  if (name.empty()) return absl::InvalidArgumentError("barrier name is empty");
  const std::string arrived = name + "/arrived";
  const std::string done = name + "/done";
  DEVMESH_ASSIGN_OR_RETURN(int64_t count, store.Add(arrived, 1));
  if (count == world_size) {
    // The last arrival releases the others and needs no further round trip
    // (so a rank 0 that leaves right after cannot strand it).
    return store.Set(done, "1");
  }
  absl::StatusOr<std::string> released = store.Get(done, timeout);
  if (released.ok()) return absl::OkStatus();
  if (released.status().code() != absl::StatusCode::kDeadlineExceeded) {
    return released.status();
  }
  absl::StatusOr<std::string> seen = store.Get(arrived, absl::ZeroDuration());
  return absl::DeadlineExceededError(absl::StrCat(
      "barrier '", name, "': only ", seen.ok() ? *seen : "?", " of ",
      world_size, " ranks arrived within ", absl::FormatDuration(timeout),
      " (rank ", rank, " waiting)"));
}

}  // namespace devmesh
