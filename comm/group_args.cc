#include "comm/group_args.h"

#include <limits>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"

namespace devmesh {

absl::StatusOr<std::vector<int>> ResolveGroupRanks(absl::string_view backend,
                                                   int rank, int size,
                                                   const CommOptions& options) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": size ", size, " must be at least 1"));
  }
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, ": rank ", rank, " is outside [0, ", size, ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": timeout ",
                     absl::FormatDuration(options.timeout), " must be positive"));
  }
  std::vector<int> global_ranks = options.global_ranks;
  if (global_ranks.empty()) {
    global_ranks.resize(size);
    std::iota(global_ranks.begin(), global_ranks.end(), 0);
  } else if (static_cast<int>(global_ranks.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, ": global_ranks has ", global_ranks.size(),
                     " entries for a group of size ", size));
  }
  return global_ranks;
}

absl::StatusOr<CommOptions> SplitChildOptions(
    absl::string_view backend, const CommOptions& parent,
    const std::optional<absl::Duration>& timeout) {
  CommOptions child = parent;
  if (timeout.has_value()) {
    if (*timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(backend, " split: timeout (",
                       absl::FormatDuration(*timeout), ") must be positive"));
    }
    child.timeout = *timeout;
  }
  return child;
}

absl::Status CheckBufferArg(absl::string_view backend, absl::string_view op,
                            absl::string_view name, const void* ptr,
                            size_t count, size_t blocks, DataType dtype) {
  const size_t elem = DataTypeSize(dtype);
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, " ", op, ": invalid dtype value ", static_cast<int>(dtype)));
  }
  if (count > std::numeric_limits<size_t>::max() / elem / blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, " ", op, ": count ", count, " x ", blocks, " blocks of ",
        DataTypeName(dtype), " overflows the byte count"));
  }
  if (ptr == nullptr && count > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, " ", op, ": ", name, " buffer is null with count ", count));
  }
  return absl::OkStatus();
}

absl::Status CheckReduceOpArg(absl::string_view backend, absl::string_view op,
                              ReduceOp reduce) {
  const int value = static_cast<int>(reduce);
  if (value < 0 || value > static_cast<int>(ReduceOp::kAvg)) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, " ", op, ": invalid ReduceOp value ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShrunkGroup> PlanShrink(absl::string_view backend, int rank,
                                       const std::vector<int>& global_ranks,
                                       absl::Span<const int> exclude) {
  const int size = static_cast<int>(global_ranks.size());
  if (exclude.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend,
        " shrink: nothing to exclude (ncclCommShrink needs at least one "
        "rank)"));
  }
  std::set<int> excluded;
  for (int r : exclude) {
    if (r < 0 || r >= size) {
      return absl::InvalidArgumentError(absl::StrCat(
          backend, " shrink: excluded rank ", r, " is outside [0, ", size,
          ")"));
    }
    if (!excluded.insert(r).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(backend, " shrink: rank ", r, " is excluded twice"));
    }
  }
  if (static_cast<int>(excluded.size()) == size) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, " shrink: excluding all ", size, " ranks leaves no group"));
  }
  if (excluded.count(rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend, " shrink: this rank (", rank,
        ") is excluded: an excluded member does not call Shrink"));
  }
  ShrunkGroup group;
  for (int r = 0; r < size; ++r) {
    if (excluded.count(r)) continue;
    if (r == rank) group.rank = static_cast<int>(group.global_ranks.size());
    group.global_ranks.push_back(global_ranks[r]);
  }
  return group;
}

std::optional<std::vector<int>> ShrinkExclusions(
    const std::vector<int>& old_group, const std::vector<int>& new_group) {
  std::vector<int> removed;
  size_t next = 0;  // the next rank of new_group to find in old_group
  for (size_t r = 0; r < old_group.size(); ++r) {
    if (next < new_group.size() && old_group[r] == new_group[next]) {
      ++next;
    } else {
      removed.push_back(static_cast<int>(r));
    }
  }
  if (next != new_group.size() || removed.empty()) return std::nullopt;
  return removed;
}

}  // namespace devmesh
