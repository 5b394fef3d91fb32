// devmesh/comm/ucx/ucx_communicator.cc
#include "comm/ucx/ucx_communicator.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "comm/algorithms/p2p_collectives.h"
#include "comm/error_info.h"
#include "comm/group_args.h"
#include "comm/store_exchange.h"
#include "comm/ucx/ucx_group.h"
#include "comm/ucx/ucx_worker.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace {

using ucx_internal::Channel;
using ucx_internal::UcxGroup;
using ucx_internal::UcxWorker;

// FNV-1a: the same on every member (absl::Hash is seeded per process).
uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
constexpr uint64_t kFnvBasis = 1469598103934665603ull;

uint32_t Fold(uint64_t h) {
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// The tag ids of this process's live groups: two live groups of one
// process must not share one (their messages would match each other's).
struct LiveIds {
  sync_internal::Mutex mu;
  absl::flat_hash_set<uint32_t> ids ABSL_GUARDED_BY(mu);
};
LiveIds& GetLiveIds() {
  static LiveIds* ids = new LiveIds();
  return *ids;
}

absl::Status ClaimId(uint32_t id) {
  LiveIds& live = GetLiveIds();
  sync_internal::MutexLock lock(&live.mu);
  if (!live.ids.insert(id).second) {
    return absl::InternalError(absl::StrCat(
        "ucx: the group's tag id ", id,
        " is already used by another live group of this process (a 1 in "
        "2^32 collision per pair of groups); make the group again"));
  }
  return absl::OkStatus();
}

void ReleaseId(uint32_t id) {
  LiveIds& live = GetLiveIds();
  sync_internal::MutexLock lock(&live.mu);
  live.ids.erase(id);
}

class UcxCommunicator final : public Communicator {
 public:
  UcxCommunicator(std::unique_ptr<UcxGroup> group, CommOptions options)
      : group_(std::move(group)), options_(std::move(options)) {}
  ~UcxCommunicator() override {
    StopAsync();
    const uint32_t id = group_->id();
    group_.reset();
    ReleaseId(id);
  }

  absl::string_view backend() const override { return "ucx"; }
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  const std::vector<int>& global_ranks() const override {
    return group_->global_ranks();
  }

 protected:
  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override {
    DEVMESH_RETURN_IF_ERROR(Start());
    return algorithms::AllReduce(*group_, workspace_, send, recv, count, dtype,
                                 op);
  }
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override {
    DEVMESH_RETURN_IF_ERROR(Start());
    return algorithms::AllGather(*group_, workspace_, send, recv, count,
                                 dtype);
  }
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override {
    DEVMESH_RETURN_IF_ERROR(Start());
    return algorithms::ReduceScatter(*group_, workspace_, send, recv, count,
                                     dtype, op);
  }
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override {
    DEVMESH_RETURN_IF_ERROR(Start());
    return algorithms::Broadcast(*group_, workspace_, send, recv, count, dtype,
                                 root);
  }
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override {
    DEVMESH_RETURN_IF_ERROR(Start());
    return algorithms::AllToAll(*group_, workspace_, send, recv, count, dtype);
  }
  absl::Status DoBarrier() override {
    DEVMESH_RETURN_IF_ERROR(Start());
    return algorithms::Barrier(*group_);
  }
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override {
    algorithms::SendSpec spec{peer, buf, count * DataTypeSize(dtype)};
    return PointToPoint(CallKind::kSend, dtype, count, {&spec, 1}, {});
  }
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override {
    algorithms::RecvSpec spec{peer, buf, count * DataTypeSize(dtype)};
    return PointToPoint(CallKind::kRecv, dtype, count, {}, {&spec, 1});
  }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& split_options) override;
  absl::Status DoAbort() override {
    group_->Abort();
    return absl::OkStatus();
  }

 private:
  absl::Status Start() {
    return group_->Begin(Channel::kCollective, current_call());
  }
  // A Send or Recv: its record (kind, dtype, count) travels with the
  // message and the receiver checks it (ucx_group.h).
  absl::Status PointToPoint(CallKind kind, DataType dtype, size_t count,
                            absl::Span<const algorithms::SendSpec> sends,
                            absl::Span<const algorithms::RecvSpec> recvs) {
    CallRecord call;
    call.kind = kind;
    call.dtype = dtype;
    call.count = count;
    DEVMESH_RETURN_IF_ERROR(group_->Begin(Channel::kPointToPoint, call));
    return group_->Exchange(sends, recvs);
  }

  std::unique_ptr<UcxGroup> group_;
  const CommOptions options_;
  algorithms::Workspace workspace_;
  int64_t splits_ = 0;
};

absl::StatusOr<std::unique_ptr<Communicator>> UcxCommunicator::DoSplit(
    int color, int key, const SplitOptions& split_options) {
  DEVMESH_ASSIGN_OR_RETURN(
      CommOptions child_options,
      SplitChildOptions("ucx", options_, split_options.timeout));
  const int64_t split = splits_++;
  CallRecord call;
  call.kind = CallKind::kAllGather;
  call.dtype = DataType::kInt64;
  call.count = 2;
  call.seq = split;
  DEVMESH_RETURN_IF_ERROR(group_->Begin(Channel::kSplit, call));
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * size());
  algorithms::Workspace ws;
  DEVMESH_RETURN_IF_ERROR(algorithms::AllGather(*group_, ws, mine, all.data(),
                                                2, DataType::kInt64));
  if (color == kNoColor) return std::unique_ptr<Communicator>();
  // The child's members: the parent ranks with this color, by (key, rank).
  std::vector<std::pair<int64_t, int>> order;
  for (int r = 0; r < size(); ++r) {
    if (all[2 * r] == color) order.emplace_back(all[2 * r + 1], r);
  }
  std::sort(order.begin(), order.end());
  std::vector<std::string> addresses;
  std::vector<int> globals;
  int child_rank = -1;
  for (const auto& [k, r] : order) {
    if (r == rank()) child_rank = static_cast<int>(globals.size());
    addresses.push_back(group_->addresses()[r]);
    globals.push_back(global_ranks()[r]);
  }
  uint64_t h = Fnv1a(kFnvBasis, "split", 5);
  const uint32_t parent_id = group_->id();
  h = Fnv1a(h, &parent_id, sizeof(parent_id));
  h = Fnv1a(h, &split, sizeof(split));
  const int64_t c = color;
  h = Fnv1a(h, &c, sizeof(c));
  const uint32_t id = Fold(h);
  DEVMESH_RETURN_IF_ERROR(ClaimId(id));
  child_options.global_ranks = globals;
  DEVMESH_ASSIGN_OR_RETURN(UcxWorker* const worker, UcxWorker::Process());
  auto group = std::make_unique<UcxGroup>(
      worker, id, child_rank, std::move(addresses), std::move(globals),
      child_options.timeout, child_options.label);
  return std::unique_ptr<Communicator>(
      new UcxCommunicator(std::move(group), std::move(child_options)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options) {
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> globals,
                           ResolveGroupRanks("ucx", rank, size, options));
  if (store == nullptr) {
    return absl::InvalidArgumentError("ucx: the store is null");
  }
  DEVMESH_ASSIGN_OR_RETURN(UcxWorker* const worker, UcxWorker::Process());
  const absl::Time deadline = absl::Now() + options.timeout;

  // This member's word toward the group's tag id, then its address.
  std::random_device device;
  const uint64_t word = (uint64_t{device()} << 32) ^ device();
  std::string value(sizeof(word), '\0');
  std::memcpy(value.data(), &word, sizeof(word));
  value += worker->address();
  if (absl::Status s = store->Set(absl::StrCat("ucx/", rank), value);
      !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("ucx: publishing this member's address: ",
                                     s.message()));
  }
  std::vector<std::string> keys;
  keys.reserve(size);
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat("ucx/", r));
  int64_t round_trips = 1;
  DEVMESH_ASSIGN_OR_RETURN(
      std::vector<std::string> values,
      comm_internal::StoreAllGather(
          *store, keys, globals, deadline, "ucx group creation",
          "did not publish their UCX address", &round_trips));

  uint64_t h = kFnvBasis;
  std::vector<std::string> addresses;
  addresses.reserve(size);
  for (int r = 0; r < size; ++r) {
    const std::string& v = values[r];
    if (v.size() <= sizeof(uint64_t)) {
      return WithPeer(
          absl::InternalError(absl::StrCat(
              "ucx group creation: global rank ", globals[r],
              " published a malformed address (", v.size(), " bytes)")),
          globals[r]);
    }
    h = Fnv1a(h, v.data(), sizeof(uint64_t));
    addresses.push_back(v.substr(sizeof(uint64_t)));
  }
  const uint32_t id = Fold(h);
  DEVMESH_RETURN_IF_ERROR(ClaimId(id));
  CommOptions kept = options;
  kept.global_ranks = globals;
  auto group =
      std::make_unique<UcxGroup>(worker, id, rank, std::move(addresses),
                                 globals, options.timeout, options.label);
  return std::unique_ptr<Communicator>(
      new UcxCommunicator(std::move(group), std::move(kept)));
}

}  // namespace devmesh
