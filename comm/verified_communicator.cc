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
namespace {

// A CallRecord as it travels: fixed width, every field widened.
struct WireRecord {
  int64_t seq;
  int64_t kind;
  int64_t dtype;
  int64_t op;
  int64_t root;
  uint64_t count;
};
static_assert(sizeof(WireRecord) == 48, "six 8-byte fields");

WireRecord ToWire(const CallRecord& c) {
  return WireRecord{c.seq,
                    static_cast<int64_t>(c.kind),
                    static_cast<int64_t>(c.dtype),
                    static_cast<int64_t>(c.op),
                    c.root,
                    c.count};
}

CallRecord FromWire(const WireRecord& w) {
  CallRecord c;
  c.seq = w.seq;
  c.kind = static_cast<CallKind>(w.kind);
  c.dtype = static_cast<DataType>(w.dtype);
  c.op = static_cast<ReduceOp>(w.op);
  c.root = static_cast<int>(w.root);
  c.count = w.count;
  return c;
}

}  // namespace

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
  const WireRecord mine = ToWire(current_call());
  std::vector<WireRecord> all(static_cast<size_t>(size()));
  DEVMESH_RETURN_IF_ERROR(
      checker_->AllGather(&mine, all.data(), sizeof(mine), DataType::kUInt8));
  const std::vector<int>& ranks = global_ranks();
  auto global = [&ranks](int j) {
    return j < static_cast<int>(ranks.size()) ? ranks[static_cast<size_t>(j)]
                                              : j;
  };
  const CallRecord first = FromWire(all[0]);
  for (int j = 1; j < size(); ++j) {
    const CallRecord other = FromWire(all[static_cast<size_t>(j)]);
    if (SameCall(first, other)) continue;
    absl::Status error =
        CallMismatchError(absl::StrCat(backend(), " verify"), global(0), first,
                          global(j), other, ranks, label_);
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
