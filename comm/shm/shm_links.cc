// devmesh/comm/shm/shm_links.cc
#include "comm/shm/shm_links.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/registry.h"
#include "config/settings.h"
#include "status/status_macros.h"
#include "store/cancellable_store.h"
#include "store/prefix_store.h"

namespace devmesh {
namespace shm_internal {

namespace {
// How often a pair's creation asks whether the group is still usable while
// it waits in the store.
constexpr absl::Duration kCancelSlice = absl::Milliseconds(100);
}  // namespace

ShmLinks::ShmLinks(std::shared_ptr<Store> store, std::string prefix, int rank,
                   std::vector<int> global_ranks, CommOptions options,
                   std::function<absl::Status()> group_open)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      rank_(rank),
      global_ranks_(std::move(global_ranks)),
      backend_(CrossHostBackendName(ProcessSettings())),
      options_(std::move(options)),
      aborted_(std::make_shared<std::atomic<bool>>(false)) {
  // A pair being connected stops when this member aborts the group, when
  // the group is no longer usable (another member aborted it or was found
  // dead), and on the group's own cancel check.
  std::function<absl::Status()> outer = std::move(options_.creation_cancel);
  options_.creation_cancel = [aborted = aborted_, open = std::move(group_open),
                              outer = std::move(outer)]() -> absl::Status {
    if (aborted->load()) {
      return absl::FailedPreconditionError("the shm group was aborted");
    }
    if (open) {
      DEVMESH_RETURN_IF_ERROR(open());
    }
    return outer ? outer() : absl::OkStatus();
  };
}

ShmLinks::~ShmLinks() = default;

absl::StatusOr<Communicator*> ShmLinks::Link(int peer, size_t count,
                                             absl::string_view what) {
  const int size = static_cast<int>(global_ranks_.size());
  if (peer < 0 || peer >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm ", what, ": peer ", peer, " is outside [0, ", size, ")"));
  }
  if (peer == rank_) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm ", what, ": peer ", peer, " is this rank"));
  }
  if (count == 0) return nullptr;  // no message, no pair to connect
  if (aborted_->load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm ", what, ": communicator was aborted"));
  }
  {
    sync_internal::MutexLock lock(&mu_);
    auto it = links_.find(peer);
    if (it != links_.end()) {
      if (!it->second.ok()) return it->second.status();
      return it->second->get();
    }
  }
  // Connected outside the lock (it waits for the peer); one Send or Recv at
  // a time per communicator, so no other call makes this pair meanwhile.
  const int lo = std::min(rank_, peer);
  const int hi = std::max(rank_, peer);
  CommOptions options = options_;
  options.global_ranks = {global_ranks_[lo], global_ranks_[hi]};
  auto pair_store = std::make_shared<CancellableStore>(
      std::make_shared<PrefixStore>(store_,
                                    absl::StrCat(prefix_, "p2p/", lo, "/", hi)),
      kCancelSlice, options.creation_cancel);
  auto made = CreateCommunicator(backend_, std::move(pair_store),
                                 rank_ == lo ? 0 : 1, 2, options);
  if (!made.ok()) {
    made = WithPeer(
        Reworded(made.status(),
                 absl::StrCat("shm ", what, ": connecting the pair with peer ",
                              peer, " (global rank ", global_ranks_[peer],
                              "): ", made.status().message())),
        global_ranks_[peer]);
  }
  sync_internal::MutexLock lock(&mu_);
  if (made.ok() && aborted_->load()) (void)(*made)->Abort();
  auto& slot = links_[peer];
  slot = std::move(made);
  if (!slot.ok()) return slot.status();
  return slot->get();
}

absl::Status ShmLinks::Send(const void* buf, size_t count, DataType dtype,
                            int peer) {
  DEVMESH_ASSIGN_OR_RETURN(Communicator* const link, Link(peer, count, "send"));
  if (link == nullptr) return absl::OkStatus();  // count 0: nothing to move
  return link->Send(buf, count, dtype, rank_ < peer ? 1 : 0);
}

absl::Status ShmLinks::Recv(void* buf, size_t count, DataType dtype,
                            int peer) {
  DEVMESH_ASSIGN_OR_RETURN(Communicator* const link, Link(peer, count, "recv"));
  if (link == nullptr) return absl::OkStatus();  // count 0: nothing to move
  return link->Recv(buf, count, dtype, rank_ < peer ? 1 : 0);
}

void ShmLinks::Abort() {
  aborted_->store(true);
  sync_internal::MutexLock lock(&mu_);
  for (auto& [peer, link] : links_) {
    if (link.ok() && *link != nullptr) (void)(*link)->Abort();
  }
}

int ShmLinks::connected() const {
  sync_internal::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [peer, link] : links_) n += link.ok() ? 1 : 0;
  return n;
}

}  // namespace shm_internal
}  // namespace devmesh
