// devmesh/comm/verified_communicator.cc
#include "comm/verified_communicator.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/call_check.h"
#include "status/status_macros.h"

namespace devmesh {

VerifiedCommunicator::VerifiedCommunicator(
    std::shared_ptr<Communicator> inner, std::shared_ptr<Communicator> checker,
    std::string label)
    : ForwardingCommunicator(std::move(inner)),
      checker_(std::move(checker)),
      label_(std::move(label)) {}

absl::Status VerifiedCommunicator::Intercept(
    CallKind kind, absl::FunctionRef<absl::Status()> call) {
  if (kind == CallKind::kSend || kind == CallKind::kRecv ||
      kind == CallKind::kBatchSendRecv) {
    return call();
  }
  {
    sync_internal::MutexLock lock(&mu_);
    if (!refusal_.ok()) return refusal_;
  }
  const CallRecordWire mine = ToCallRecordWire(current_call());
  std::vector<CallRecordWire> all(static_cast<size_t>(size()));
  DEVMESH_RETURN_IF_ERROR(
      checker_->AllGather(&mine, all.data(), sizeof(mine), DataType::kUInt8));
  absl::Status error = CompareCallRecords(absl::StrCat(backend(), " verify"),
                                          all, global_ranks(), label_);
  if (!error.ok()) {
    sync_internal::MutexLock lock(&mu_);
    refusal_ = error;
    return error;
  }
  return call();
}

absl::StatusOr<std::unique_ptr<Communicator>> VerifiedCommunicator::DoSplit(
    int color, int key, const SplitOptions& options) {
  return inner()->Split(color, key, options);
}

absl::Status VerifiedCommunicator::DoAbort() {
  absl::Status checker = checker_->Abort();
  absl::Status inner_status = inner()->Abort();
  return inner_status.ok() ? checker : inner_status;
}

absl::StatusOr<std::unique_ptr<Communicator>> VerifyCalls(
    std::shared_ptr<Communicator> inner, std::shared_ptr<Communicator> checker,
    std::string label) {
  if (inner == nullptr || checker == nullptr) {
    return absl::InvalidArgumentError(
        "VerifyCalls needs a communicator and a checker, got null");
  }
  if (inner->size() != checker->size() || inner->rank() != checker->rank() ||
      inner->global_ranks() != checker->global_ranks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VerifyCalls: the checker (", checker->backend(), ", global ranks [",
        absl::StrJoin(checker->global_ranks(), ", "), "], rank ",
        checker->rank(), ") is not over the members of the communicator (",
        inner->backend(), ", global ranks [",
        absl::StrJoin(inner->global_ranks(), ", "), "], rank ", inner->rank(),
        ")"));
  }
  return std::unique_ptr<Communicator>(new VerifiedCommunicator(
      std::move(inner), std::move(checker), std::move(label)));
}

}  // namespace devmesh
