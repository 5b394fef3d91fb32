// devmesh/device_mesh/state_broadcast.cc
#include "device_mesh/state_broadcast.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {

absl::Status BroadcastState(const DeviceMesh& mesh, MeshDim replica_dim,
                            absl::Span<const StateBuffer> buffers,
                            int64_t source_replica, size_t chunk_bytes) {
  if (chunk_bytes == 0) {
    return absl::InvalidArgumentError("BroadcastState needs chunk_bytes > 0");
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].data == nullptr && buffers[i].bytes > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BroadcastState: buffer ", i, " is null with ", buffers[i].bytes,
          " bytes"));
    }
  }
  DEVMESH_ASSIGN_OR_RETURN(const int64_t replicas, mesh.size(replica_dim));
  if (source_replica < 0 || source_replica >= replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BroadcastState: source replica ", source_replica, " is outside [0, ",
        replicas, ")"));
  }
  DEVMESH_ASSIGN_OR_RETURN(auto group, mesh.GetGroup(replica_dim));
  const int root = static_cast<int>(source_replica);
  // The source's sizes, then whether every rank's match (max of mismatches),
  // so that no rank waits in a chunk another has refused.
  std::vector<int64_t> sizes;
  sizes.push_back(static_cast<int64_t>(buffers.size()));
  for (const StateBuffer& b : buffers) {
    sizes.push_back(static_cast<int64_t>(b.bytes));
  }
  const std::string dim_text =
      replica_dim.by_name() ? replica_dim.name()
                            : absl::StrCat(replica_dim.index());
  // Every rank fails alike: a mismatch found on one is all-reduced first.
  auto agree = [&](int64_t mismatch, absl::string_view what) -> absl::Status {
    DEVMESH_RETURN_IF_ERROR(group->AllReduce(
        &mismatch, &mismatch, 1, DataType::kInt64, ReduceOp::kMax));
    if (mismatch == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "BroadcastState: along mesh dim ", dim_text, " the ", what,
        " differ from the source replica's",
        mismatch > 1 ? absl::StrCat(" (at buffer ", mismatch - 2, ")")
                     : "",
        "; every rank passes the same count and sizes"));
  };
  int64_t count = sizes[0];
  DEVMESH_RETURN_IF_ERROR(
      group->Broadcast(&count, &count, 1, DataType::kInt64, root));
  DEVMESH_RETURN_IF_ERROR(agree(count == sizes[0] ? 0 : 1, "buffer counts"));
  std::vector<int64_t> theirs(sizes.size(), 0);
  DEVMESH_RETURN_IF_ERROR(group->Broadcast(sizes.data(), theirs.data(),
                                           sizes.size(), DataType::kInt64,
                                           root));
  int64_t first = 0;
  for (size_t i = 1; i < sizes.size() && first == 0; ++i) {
    if (theirs[i] != sizes[i]) first = static_cast<int64_t>(i) + 1;
  }
  DEVMESH_RETURN_IF_ERROR(agree(first, "buffer sizes"));
  for (const StateBuffer& b : buffers) {
    auto* bytes = static_cast<uint8_t*>(b.data);
    for (size_t off = 0; off < b.bytes; off += chunk_bytes) {
      const size_t n = std::min(chunk_bytes, b.bytes - off);
      DEVMESH_RETURN_IF_ERROR(group->Broadcast(bytes + off, bytes + off, n,
                                               DataType::kUInt8, root));
    }
  }
  return absl::OkStatus();
}

}  // namespace devmesh
