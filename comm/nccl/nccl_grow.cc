// devmesh/comm/nccl/nccl_grow.cc
// GrowNcclCommunicator (nccl_communicator.h has the contract): ncclCommGrow
// where DEVMESH_NCCL_HAS_GROW (NCCL >= 2.29; nccl_communicator_impl.h), a
// fresh communicator over the grown group otherwise. NCCL's recipe (its
// nccl.h.in and the user guide's "Growing a communicator"): one member of
// the parent makes the grow id with ncclCommGetUniqueId and hands it to the
// new ranks out of band; the parent's members call
// ncclCommGrow(parent, nRanks, id or NULL, -1, ...), the new ranks
// ncclCommGrow(NULL, nRanks, &id, rank, ...); members keep their ranks, new
// ranks number from the parent's size; the id is single-use; nothing may be
// outstanding on the parent.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/forwarding_communicator.h"
#include "comm/group_args.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_communicator_impl.h"
#include "comm/nccl/nccl_status.h"
#include "status/status_macros.h"

namespace devmesh {

bool NcclGrowBuiltIn() { return DEVMESH_NCCL_HAS_GROW != 0; }

namespace {

// Where the parent's rank 0 puts the grow id for the new ranks.
constexpr char kGrowIdKey[] = "nccl/grow_id";

// The NCCL communicator under `c` (through ForwardingCommunicators), or
// null when there is none.
nccl_internal::NcclCommunicator* NcclUnder(Communicator* c) {
  while (c != nullptr) {
    if (auto* n = dynamic_cast<nccl_internal::NcclCommunicator*>(c)) return n;
    auto* f = dynamic_cast<ForwardingCommunicator*>(c);
    c = f == nullptr ? nullptr : f->inner();
  }
  return nullptr;
}

#if DEVMESH_NCCL_HAS_GROW
// Checks that `made` is rank `rank` of `size`; aborts it otherwise.
absl::Status CheckGrown(Communicator& made, int rank, int size) {
  if (made.rank() == rank && made.size() == size) return absl::OkStatus();
  const std::string got =
      absl::StrCat("rank ", made.rank(), " of ", made.size());
  (void)made.Abort();
  return absl::InternalError(absl::StrCat(
      "ncclCommGrow made ", got, ", expected rank ", rank, " of ", size,
      "; the new communicator was aborted"));
}

// A new rank's side: the grow id from the store, then ncclCommGrow(NULL).
absl::StatusOr<std::unique_ptr<Communicator>> GrowAsNewRank(
    Store& store, int new_size, int new_rank, std::vector<int> global_ranks,
    const CommOptions& options) {
  using nccl_internal::NcclStatus;
  DEVMESH_ASSIGN_OR_RETURN(const int device,
                           nccl_internal::SetDeviceFor(options));
  const absl::Time deadline = absl::Now() + options.timeout;
  ncclUniqueId id;
  DEVMESH_ASSIGN_OR_RETURN(std::string value,
                           store.Get(kGrowIdKey, options.timeout));
  if (value.size() != sizeof(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl grow: store key ", kGrowIdKey, " holds ",
                     value.size(), " bytes, expected ", sizeof(id)));
  }
  std::memcpy(&id, value.data(), sizeof(id));
  ncclConfig_t config = nccl_internal::MakeConfig(options.nccl);
  ncclComm_t child = nullptr;
  const ncclResult_t r =
      ncclCommGrow(nullptr, new_size, &id, new_rank, &child, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (child != nullptr) ncclCommAbort(child);
    return NcclStatus(r, "ncclCommGrow");
  }
  if (child == nullptr) {
    return absl::InternalError(
        "ncclCommGrow: accepted, but it returned no communicator");
  }
  DEVMESH_RETURN_IF_ERROR(nccl_internal::WaitForComm(
      child, deadline, "ncclCommGrow", options.creation_cancel));
  DEVMESH_ASSIGN_OR_RETURN(
      auto wrapped, nccl_internal::NcclCommunicator::Wrap(
                        child, device, std::move(global_ranks), options));
  DEVMESH_RETURN_IF_ERROR(CheckGrown(*wrapped, new_rank, new_size));
  return std::unique_ptr<Communicator>(std::move(wrapped));
}
#endif  // DEVMESH_NCCL_HAS_GROW

}  // namespace

absl::StatusOr<NcclGrowResult> GrowNcclCommunicator(
    Communicator* parent, std::shared_ptr<Store> store, int old_size,
    int new_size, int new_rank, const CommOptions& options) {
  if (store == nullptr) {
    return absl::InvalidArgumentError("nccl grow: store is null");
  }
  if (old_size < 1 || new_size <= old_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl grow: from ", old_size, " to ", new_size,
        " ranks; the grown group must be larger than a non-empty parent"));
  }
  nccl_internal::NcclCommunicator* member = nullptr;
  int rank = new_rank;
  if (parent != nullptr) {
    member = NcclUnder(parent);
    if (member == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nccl grow: the parent is a ", parent->backend(),
          " communicator; ncclCommGrow needs an NCCL one"));
    }
    if (member->size() != old_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl grow: the parent has ", member->size(),
                       " ranks, but old_size is ", old_size));
    }
    if (new_rank != -1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nccl grow: a member of the parent keeps its rank (",
          member->rank(), "); pass new_rank = -1, got ", new_rank));
    }
    rank = member->rank();
  } else if (new_rank < old_size || new_rank >= new_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl grow: a new rank must be in [", old_size, ", ", new_size,
        ") (members keep 0 .. ", old_size - 1, "), got ", new_rank));
  }
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> global_ranks,
                           ResolveGroupRanks("nccl grow", rank, new_size,
                                             options));
  NcclGrowResult result;
#if DEVMESH_NCCL_HAS_GROW
  result.grown_from_parent = true;
  if (member != nullptr) {
    DEVMESH_ASSIGN_OR_RETURN(
        result.comm, member->GrowAsMember(*store, new_size,
                                          std::move(global_ranks), options));
  } else {
    DEVMESH_ASSIGN_OR_RETURN(
        result.comm, GrowAsNewRank(*store, new_size, new_rank,
                                   std::move(global_ranks), options));
  }
#else
  // No ncclCommGrow in the NCCL built against: the grown group is created
  // anew, every caller under its rank in it.
  CommOptions fresh = options;
  fresh.global_ranks = std::move(global_ranks);
  DEVMESH_ASSIGN_OR_RETURN(
      result.comm, CreateNcclCommunicator(store, rank, new_size, fresh));
#endif
  return result;
}

namespace nccl_internal {

#if DEVMESH_NCCL_HAS_GROW
absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::GrowAsMember(
    Store& store, int new_size, std::vector<int> global_ranks,
    const CommOptions& options) {
  if (shared_->aborted.load() || shared_->revoked.load()) {
    return absl::FailedPreconditionError(
        "nccl grow: the parent communicator was aborted or revoked");
  }
  DEVMESH_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  const absl::Time deadline = absl::Now() + options.timeout;
  ncclUniqueId id;
  const ncclUniqueId* pass = nullptr;  // members other than rank 0
  if (rank_ == 0) {
    DEVMESH_RETURN_IF_ERROR(NcclStatus(ncclCommGetUniqueId(comm_, &id),
                                       "ncclCommGetUniqueId", comm_));
    DEVMESH_RETURN_IF_ERROR(store.Set(
        kGrowIdKey,
        absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
    pass = &id;
  }
  ncclConfig_t config = MakeConfig(options.nccl);
  ncclComm_t child = nullptr;
  const ncclResult_t r =
      ncclCommGrow(comm_, new_size, pass, -1, &child, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (child != nullptr) ncclCommAbort(child);
    return NcclStatus(r, "ncclCommGrow", comm_);
  }
  // Non-blocking, as Shrink: the parent's state, then the child's.
  if (auto s = WaitForComm(comm_, deadline, "ncclCommGrow (parent)",
                           options.creation_cancel, [this] { AbortComm(); });
      !s.ok()) {
    if (child != nullptr) ncclCommAbort(child);
    return s;
  }
  if (child == nullptr) {
    return absl::InternalError(
        "ncclCommGrow: done, but it returned no communicator");
  }
  DEVMESH_RETURN_IF_ERROR(WaitForComm(child, deadline, "ncclCommGrow",
                                      options.creation_cancel));
  DEVMESH_ASSIGN_OR_RETURN(
      auto wrapped, Wrap(child, device_, std::move(global_ranks), options));
  DEVMESH_RETURN_IF_ERROR(CheckGrown(*wrapped, rank_, new_size));
  return std::unique_ptr<Communicator>(std::move(wrapped));
}
#endif  // DEVMESH_NCCL_HAS_GROW

}  // namespace nccl_internal
}  // namespace devmesh
