// devmesh/comm/two_level/two_level_communicator.cc
#include "comm/two_level/two_level_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "comm/call_check.h"
#include "comm/group_args.h"
#include "comm/reduce_functions.h"
#include "comm/registry.h"
#include "comm/two_level/two_level_levels.h"
#include "comm/two_level/two_level_plan.h"
#include "status/status_macros.h"
#include "store/prefix_store.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace {

class TwoLevelCommunicator final : public Communicator {
 public:
  TwoLevelCommunicator(TwoLevelPlan plan, TwoLevelOptions bounds,
                       std::vector<int> global_ranks, int rank,
                       CommOptions options, std::shared_ptr<Store> store,
                       std::shared_ptr<Communicator> flat)
      : plan_(std::move(plan)),
        bounds_(bounds),
        global_ranks_(std::move(global_ranks)),
        rank_(rank),
        options_(std::move(options)),
        store_(std::move(store)),
        flat_(std::move(flat)) {}
  ~TwoLevelCommunicator() override { StopAsync(); }

  absl::string_view backend() const override { return "two_level"; }
  TwoLevelPath path() const {
    if (!levels_made_) return TwoLevelPath::kNotMade;
    return flat_only_ ? TwoLevelPath::kFlat : TwoLevelPath::kTwoLevels;
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(global_ranks_.size()); }
  const std::vector<int>& global_ranks() const override {
    return global_ranks_;
  }

 protected:
  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override;
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override {
    return Flat(CallKind::kAllGather, [&](Communicator& flat) {
      return flat.AllGather(send, recv, count, dtype);
    });
  }
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override {
    return Flat(CallKind::kReduceScatter, [&](Communicator& flat) {
      return flat.ReduceScatter(send, recv, count, dtype, op);
    });
  }
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override {
    return Flat(CallKind::kBroadcast, [&](Communicator& flat) {
      return flat.Broadcast(send, recv, count, dtype, root);
    });
  }
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override {
    return Flat(CallKind::kAllToAll, [&](Communicator& flat) {
      return flat.AllToAll(send, recv, count, dtype);
    });
  }
  absl::Status DoGather(const void* send, void* recv, size_t count,
                        DataType dtype, int root) override {
    return Flat(CallKind::kGather, [&](Communicator& flat) {
      return flat.Gather(send, recv, count, dtype, root);
    });
  }
  absl::Status DoScatter(const void* send, void* recv, size_t count,
                         DataType dtype, int root) override {
    return Flat(CallKind::kScatter, [&](Communicator& flat) {
      return flat.Scatter(send, recv, count, dtype, root);
    });
  }
  absl::Status DoAllToAllV(const void* send,
                           absl::Span<const size_t> send_counts,
                           absl::Span<const size_t> send_offsets, void* recv,
                           absl::Span<const size_t> recv_counts,
                           absl::Span<const size_t> recv_offsets,
                           DataType dtype) override {
    return Flat(CallKind::kAllToAllV, [&](Communicator& flat) {
      return flat.AllToAllV(send, send_counts, send_offsets, recv,
                            recv_counts, recv_offsets, dtype);
    });
  }
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override {
    return Flat(CallKind::kSend, [&](Communicator& flat) {
      return flat.Send(buf, count, dtype, peer);
    });
  }
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override {
    return Flat(CallKind::kRecv, [&](Communicator& flat) {
      return flat.Recv(buf, count, dtype, peer);
    });
  }
  absl::Status DoBatchSendRecv(absl::Span<const P2POp> ops) override {
    return Flat(CallKind::kBatchSendRecv,
                [&](Communicator& flat) { return flat.BatchSendRecv(ops); });
  }
  absl::Status DoBarrier() override {
    return Flat(CallKind::kBarrier,
                [&](Communicator& flat) { return flat.Barrier(); });
  }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override {
    DEVMESH_RETURN_IF_ERROR(CheckUsable("split"));
    std::shared_ptr<Communicator> flat = Level(Which::kFlat);
    if (flat == nullptr) return CheckUsable("split");
    return flat->Split(color, key, options);
  }
  absl::Status DoAbort() override {
    aborted_.store(true);
    for (Which w : {Which::kIntra, Which::kInter, Which::kFlat}) {
      if (std::shared_ptr<Communicator> c = Level(w)) (void)c->Abort();
    }
    return absl::OkStatus();
  }

 private:
  enum class Which { kIntra, kInter, kFlat };

  std::shared_ptr<Communicator> Level(Which which) const {
    sync_internal::MutexLock lock(&mu_);
    switch (which) {
      case Which::kIntra:
        return intra_;
      case Which::kInter:
        return inter_;
      case Which::kFlat:
        return flat_;
    }
    return nullptr;
  }

  // The group's standing error: the first failure, else FailedPrecondition
  // after Abort.
  absl::Status CheckUsable(absl::string_view what) const {
    {
      sync_internal::MutexLock lock(&mu_);
      if (!broken_.ok()) return broken_;
    }
    if (aborted_.load()) {
      return absl::FailedPreconditionError(
          absl::StrCat("two_level ", what, ": the communicator was aborted"));
    }
    return absl::OkStatus();
  }

  // Records `error` (of `step`, the level's words kept) as the group's and
  // tears the levels down, so that the members waiting for this one in any
  // of them fail at once (shm: its peers see it leave; ucx: its goodbye
  // notices). Returns the recorded error.
  absl::Status Fail(absl::string_view what, absl::string_view step,
                    const absl::Status& error) {
    absl::Status recorded =
        aborted_.load() && error.code() == absl::StatusCode::kFailedPrecondition
            ? error
            : Reworded(error, absl::StrCat("two_level ", what, " (", step,
                                           "): ", error.message()));
    std::shared_ptr<Communicator> intra, inter, flat;
    {
      sync_internal::MutexLock lock(&mu_);
      if (broken_.ok()) broken_ = recorded;
      intra = std::move(intra_);
      inter = std::move(inter_);
      flat = std::move(flat_);
    }
    if (intra != nullptr) (void)intra->Abort();
    // Destroyed here (unless Abort holds a share for a moment): the ucx
    // groups send their goodbyes.
    return recorded;
  }

  // The whole call's record (current_call()) compared across every
  // member: inside the host (an all-gather of the records on the intra
  // group, shared memory), then across hosts (the same on the inter group,
  // one round trip). For where the levels' own checks see only a part of
  // the call: before a flat collective, and before an all-reduce of more
  // than one piece (pieces of equal size would hide different total
  // counts). Its first step is on the intra group, as every path's.
  absl::Status CheckWholeCall(absl::string_view what, Communicator& intra,
                              Communicator& inter) {
    const CallRecordWire mine = ToCallRecordWire(current_call());
    std::vector<CallRecordWire> host(static_cast<size_t>(intra.size()));
    absl::Status s =
        intra.AllGather(&mine, host.data(), sizeof(mine), DataType::kUInt8);
    if (s.ok()) {
      s = CompareCallRecords("two_level", host, intra.global_ranks(),
                             options_.label);
    }
    if (!s.ok()) return Fail(what, "intra-host call check", s);
    std::vector<CallRecordWire> hosts(static_cast<size_t>(inter.size()));
    s = inter.AllGather(&mine, hosts.data(), sizeof(mine), DataType::kUInt8);
    if (s.ok()) {
      s = CompareCallRecords("two_level", hosts, inter.global_ranks(),
                             options_.label);
    }
    if (!s.ok()) return Fail(what, "inter-host call check", s);
    return absl::OkStatus();
  }

  // A call on the flat group. Once the levels are made, a collective (not
  // Send, Recv or BatchSendRecv, which involve only their peers) first
  // passes CheckWholeCall: its first step on the intra-host group fails
  // every member of this host at once when one of them runs the two-level
  // all-reduce (its first step an intra-host reduce or reduce_scatter)
  // while another runs this collective; its inter-host step does the same
  // across hosts (a host whose members all run this collective while
  // another host's all run an all-reduce meet on the inter group, whose
  // per-call check fails them), instead of waiting in different groups
  // until the timeout. Before the levels exist (or where the group stays
  // flat), every call starts on the flat group, a first all-reduce with
  // the levels' making (all-gathers on the flat group): the flat group's
  // own per-call check compares them.
  template <typename F>
  absl::Status Flat(CallKind kind, F&& call) {
    const absl::string_view what = CallKindName(kind);
    DEVMESH_RETURN_IF_ERROR(CheckUsable(what));
    std::shared_ptr<Communicator> flat = Level(Which::kFlat);
    if (flat == nullptr) return CheckUsable(what);
    const bool collective = kind != CallKind::kSend &&
                            kind != CallKind::kRecv &&
                            kind != CallKind::kBatchSendRecv;
    if (collective && levels_made_ && !flat_only_) {
      std::shared_ptr<Communicator> intra = Level(Which::kIntra);
      std::shared_ptr<Communicator> inter = Level(Which::kInter);
      if (intra == nullptr || inter == nullptr) return CheckUsable(what);
      DEVMESH_RETURN_IF_ERROR(CheckWholeCall(what, *intra, *inter));
    }
    absl::Status s = call(*flat);
    if (s.ok()) return s;
    return Fail(what, "flat", s);
  }

  // The first all-reduce's first step (two_level_levels.h): the intra and
  // inter groups from the flat group, no store. Its error is the
  // all-reduce's, "two_level allreduce (making the levels, <step>): ...",
  // and the group refuses later calls with it. An Abort (any thread) ends
  // it: the flat group's calls fail, the shm set-up's wait for its host's
  // verdicts asks CheckUsable, and levels made as it lands are aborted.
  absl::Status MakeLevels() {
    std::shared_ptr<Communicator> flat = Level(Which::kFlat);
    if (flat == nullptr) return CheckUsable("allreduce");
    std::string step;
    absl::StatusOr<two_level_internal::TwoLevelLevels> made =
        two_level_internal::MakeTwoLevelLevels(
            *flat, plan_, options_, store_,
            [this] { return CheckUsable("allreduce"); }, &step);
    if (!made.ok()) {
      return Fail("allreduce", absl::StrCat("making the levels, ", step),
                  made.status());
    }
    levels_made_ = true;
    flat_only_ = made->intra == nullptr;
    if (flat_only_) return CheckUsable("allreduce");
    {
      sync_internal::MutexLock lock(&mu_);
      if (!broken_.ok()) return broken_;
      intra_ = made->intra;
      inter_ = made->inter;
    }
    // An Abort that read the levels before they were in place: abort them
    // here (DoAbort sets aborted_ before it reads them).
    if (aborted_.load()) {
      (void)made->intra->Abort();
      (void)made->inter->Abort();
    }
    return CheckUsable("allreduce");
  }

  absl::Status ShardAllReduce(Communicator& intra, Communicator& inter,
                              const void* send, void* recv, size_t count,
                              DataType dtype, ReduceOp op);
  absl::Status LeaderAllReduce(Communicator& intra, Communicator& inter,
                               const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op);

  const TwoLevelPlan plan_;
  const TwoLevelOptions bounds_;
  const std::vector<int> global_ranks_;
  const int rank_;
  const CommOptions options_;  // the group's (label, timeout)
  // For the intra group, which keeps it for calls a two-level group never
  // makes on it (Send, Recv, Split); never used by the levels' making.
  const std::shared_ptr<Store> store_;
  // The calling thread's only (one call at a time): whether the first
  // all-reduce made the levels, and whether they turned out flat only.
  bool levels_made_ = false;
  bool flat_only_ = false;
  mutable sync_internal::Mutex mu_;
  std::shared_ptr<Communicator> intra_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Communicator> inter_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Communicator> flat_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> aborted_{false};
};

// A step's status, with the step's name for Fail.
#define DEVMESH_TWO_LEVEL_STEP(step_name, expr) \
  do {                                          \
    step = step_name;                           \
    absl::Status step_status = (expr);          \
    if (!step_status.ok()) return step_status;  \
  } while (0)

absl::Status TwoLevelCommunicator::DoAllReduce(const void* send, void* recv,
                                               size_t count, DataType dtype,
                                               ReduceOp op) {
  DEVMESH_RETURN_IF_ERROR(CheckUsable("allreduce"));
  if (count == 0) return absl::OkStatus();
  if (!levels_made_) DEVMESH_RETURN_IF_ERROR(MakeLevels());
  if (flat_only_) {
    return Flat(CallKind::kAllReduce, [&](Communicator& flat) {
      return flat.AllReduce(send, recv, count, dtype, op);
    });
  }
  std::shared_ptr<Communicator> intra = Level(Which::kIntra);
  std::shared_ptr<Communicator> inter = Level(Which::kInter);
  if (intra == nullptr || inter == nullptr) return CheckUsable("allreduce");
  const ReduceOp step_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const size_t local = static_cast<size_t>(plan_.local_size);
  // Buffers that overlap without being one: moved, then reduced in place
  // (the steps read send after they wrote parts of recv).
  const size_t bytes = count * DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (in != out && in < out + bytes && out < in + bytes) {
    std::memmove(out, in, bytes);
    in = out;
  }
  // Pieces of piece_bytes, each through its steps before the next: the
  // shared-memory steps stay below the sizes where they slow down (a
  // 2-member shm all-reduce took 0.4 ms at 4 MiB and 11-22 ms at 16 MiB in
  // docs/two_level.md's runs), while the inter-host ring still pipelines
  // within a piece.
  const size_t width = DataTypeSize(dtype);
  const size_t piece = std::max(local, bounds_.piece_bytes / width);
  if (count > piece) {
    DEVMESH_RETURN_IF_ERROR(CheckWholeCall("allreduce", *intra, *inter));
  }
  for (size_t at = 0; at < count; at += piece) {
    const size_t n = std::min(piece, count - at);
    const void* piece_send = in + at * width;
    void* piece_recv = out + at * width;
    absl::Status s =
        n >= local && n * width >= bounds_.shard_min_bytes
            ? ShardAllReduce(*intra, *inter, piece_send, piece_recv, n, dtype,
                             step_op)
            : LeaderAllReduce(*intra, *inter, piece_send, piece_recv, n,
                              dtype, step_op);
    if (!s.ok()) return s;
  }
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(recv, count, dtype, size());
  }
  return absl::OkStatus();
}

absl::Status TwoLevelCommunicator::ShardAllReduce(
    Communicator& intra, Communicator& inter, const void* send, void* recv,
    size_t count, DataType dtype, ReduceOp op) {
  const size_t width = DataTypeSize(dtype);
  const size_t local = static_cast<size_t>(plan_.local_size);
  const size_t me = static_cast<size_t>(plan_.local_index);
  const size_t block = count / local;
  const size_t tail = count - block * local;
  const int last = plan_.local_size - 1;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  char* mine = out + me * block * width;
  const size_t shard = block + (static_cast<int>(me) == last ? tail : 0);
  absl::string_view step;
  absl::Status s = [&]() -> absl::Status {
    DEVMESH_TWO_LEVEL_STEP("intra-host reduce_scatter",
                           intra.ReduceScatter(send, mine, block, dtype, op));
    if (tail > 0) {
      DEVMESH_TWO_LEVEL_STEP(
          "intra-host reduce of the tail",
          intra.Reduce(in + local * block * width, out + local * block * width,
                       tail, dtype, op, last));
    }
    DEVMESH_TWO_LEVEL_STEP("inter-host allreduce of the shard",
                           inter.AllReduce(mine, mine, shard, dtype, op));
    DEVMESH_TWO_LEVEL_STEP("intra-host allgather",
                           intra.AllGather(mine, out, block, dtype));
    if (tail > 0) {
      DEVMESH_TWO_LEVEL_STEP(
          "intra-host broadcast of the tail",
          intra.Broadcast(out + local * block * width,
                          out + local * block * width, tail, dtype, last));
    }
    return absl::OkStatus();
  }();
  if (s.ok()) return s;
  return Fail("allreduce", step, s);
}

absl::Status TwoLevelCommunicator::LeaderAllReduce(
    Communicator& intra, Communicator& inter, const void* send, void* recv,
    size_t count, DataType dtype, ReduceOp op) {
  absl::string_view step;
  absl::Status s = [&]() -> absl::Status {
    DEVMESH_TWO_LEVEL_STEP("intra-host reduce",
                           intra.Reduce(send, recv, count, dtype, op, 0));
    if (plan_.local_index == 0) {
      DEVMESH_TWO_LEVEL_STEP("inter-host allreduce of the host leaders",
                             inter.AllReduce(recv, recv, count, dtype, op));
    }
    DEVMESH_TWO_LEVEL_STEP("intra-host broadcast",
                           intra.Broadcast(recv, recv, count, dtype, 0));
    return absl::OkStatus();
  }();
  if (s.ok()) return s;
  return Fail("allreduce", step, s);
}

#undef DEVMESH_TWO_LEVEL_STEP

absl::Status Prefixed(absl::string_view level, const absl::Status& error) {
  return Reworded(error, absl::StrCat("two_level creation (", level,
                                      "): ", error.message()));
}

}  // namespace

std::optional<TwoLevelPath> TwoLevelPathOf(const Communicator& comm) {
  const auto* two_level = dynamic_cast<const TwoLevelCommunicator*>(&comm);
  if (two_level == nullptr) return std::nullopt;
  return two_level->path();
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateTwoLevelCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options, absl::Span<const std::string> host_keys,
    absl::string_view cross_backend, const TwoLevelOptions& two_level) {
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> globals,
                           ResolveGroupRanks("two_level", rank, size, options));
  if (store == nullptr) {
    return absl::InvalidArgumentError("two_level: the store is null");
  }
  if (two_level.piece_bytes == 0) {
    return absl::InvalidArgumentError("two_level: piece_bytes is 0");
  }
  if (static_cast<int>(host_keys.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("two_level: ", host_keys.size(),
                     " host keys for a group of ", size));
  }
  std::optional<TwoLevelPlan> plan = PlanTwoLevel(host_keys, rank);
  if (!plan.has_value()) {
    return absl::InvalidArgumentError(
        "two_level: the members are not on >= 2 hosts with the same number "
        "(>= 2) of them on each");
  }
  // The flat group, as a flat group of these members would be made; the
  // levels come at the first all-reduce (MakeLevels).
  CommOptions flat_options = options;
  flat_options.global_ranks = globals;
  if (!flat_options.label.empty()) {
    flat_options.label = absl::StrCat(flat_options.label, " (flat)");
  }
  auto flat_made = CreateCommunicator(
      cross_backend, std::make_shared<PrefixStore>(store, "flat/"), rank, size,
      flat_options);
  if (!flat_made.ok()) return Prefixed("flat", flat_made.status());
  std::shared_ptr<Communicator> flat = *std::move(flat_made);
  CommOptions group_options = options;
  group_options.global_ranks = globals;
  return std::unique_ptr<Communicator>(new TwoLevelCommunicator(
      *std::move(plan), two_level, std::move(globals), rank,
      std::move(group_options), std::move(store), std::move(flat)));
}

}  // namespace devmesh
