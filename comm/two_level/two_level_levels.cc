// devmesh/comm/two_level/two_level_levels.cc
#include "comm/two_level/two_level_levels.h"

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/shm/shm_communicator.h"
#include "comm/shm/shm_setup.h"
#include "status/status_macros.h"
#include "store/prefix_store.h"

namespace devmesh {
namespace two_level_internal {
namespace {

// The shm set-up's exchange among this host's members, carried by
// all-gathers on the whole flat group: every host's set-up runs at once and
// each member keeps its own host's records. Every member of the flat group
// makes the same calls in the same order (the set-up's sequence does not
// depend on its outcome up to step 4), so the flat group's per-call check
// holds.
class FlatHostChannel final : public shm_internal::SetupChannel {
 public:
  FlatHostChannel(Communicator& flat, const TwoLevelPlan& plan,
                  std::vector<int> host_globals, absl::Time deadline,
                  std::function<absl::Status()> cancelled)
      : flat_(flat),
        plan_(plan),
        host_globals_(std::move(host_globals)),
        deadline_(deadline),
        cancelled_(std::move(cancelled)) {}

  int rank() const override { return plan_.local_index; }
  const std::vector<int>& global_ranks() const override {
    return host_globals_;
  }
  absl::Time deadline() const override { return deadline_; }
  absl::Status Cancelled() const override {
    return cancelled_ ? cancelled_() : absl::OkStatus();
  }

  // Local index 0's bytes: every member sends its buffer (zeros but the
  // host's first member's) and keeps its host's first member's.
  absl::Status Broadcast(void* data, size_t bytes) override {
    std::vector<char> mine(bytes, 0);
    if (plan_.local_index == 0) std::memcpy(mine.data(), data, bytes);
    std::vector<char> every(bytes * static_cast<size_t>(flat_.size()));
    DEVMESH_RETURN_IF_ERROR(
        flat_.AllGather(mine.data(), every.data(), bytes, DataType::kUInt8));
    std::memcpy(data, every.data() + Offset(plan_.intra_members[0], bytes),
                bytes);
    return absl::OkStatus();
  }

  absl::Status AllGather(const void* mine, void* all, size_t bytes) override {
    std::vector<char> every(bytes * static_cast<size_t>(flat_.size()));
    DEVMESH_RETURN_IF_ERROR(
        flat_.AllGather(mine, every.data(), bytes, DataType::kUInt8));
    char* out = static_cast<char*>(all);
    for (size_t i = 0; i < plan_.intra_members.size(); ++i) {
      std::memcpy(out + i * bytes,
                  every.data() + Offset(plan_.intra_members[i], bytes), bytes);
    }
    return absl::OkStatus();
  }

 private:
  static size_t Offset(int flat_rank, size_t bytes) {
    return static_cast<size_t>(flat_rank) * bytes;
  }

  Communicator& flat_;
  const TwoLevelPlan& plan_;
  const std::vector<int> host_globals_;
  const absl::Time deadline_;
  const std::function<absl::Status()> cancelled_;
};

}  // namespace

absl::StatusOr<TwoLevelLevels> MakeTwoLevelLevels(
    Communicator& flat, const TwoLevelPlan& plan, const CommOptions& options,
    std::shared_ptr<Store> store, std::function<absl::Status()> cancelled,
    std::string* step) {
  const std::vector<int>& globals = flat.global_ranks();
  CommOptions intra_options = options;
  intra_options.global_ranks.clear();
  for (int r : plan.intra_members)
    intra_options.global_ranks.push_back(globals[r]);
  if (!intra_options.label.empty()) {
    intra_options.label = absl::StrCat(intra_options.label, " (intra-host)");
  }

  // 1. This host's segment, over the flat group.
  *step = "intra-host shm set-up";
  ShmOptions shm;
  shm.require = false;
  shm.timeout = options.timeout;
  FlatHostChannel channel(flat, plan, intra_options.global_ranks,
                          absl::Now() + options.timeout, std::move(cancelled));
  DEVMESH_ASSIGN_OR_RETURN(std::optional<shm_internal::ShmSetup> setup,
                           shm_internal::SetUpSharedMemory(channel, shm));

  // 2. Every host's answer, so that every member decides alike.
  *step = "levels verdict";
  const uint8_t mine = setup.has_value() ? 1 : 0;
  std::vector<uint8_t> verdicts(static_cast<size_t>(flat.size()), 0);
  DEVMESH_RETURN_IF_ERROR(
      flat.AllGather(&mine, verdicts.data(), 1, DataType::kUInt8));
  for (uint8_t v : verdicts) {
    if (v == 0) return TwoLevelLevels{};
  }
  TwoLevelLevels levels;
  levels.intra = std::make_shared<ShmCommunicator>(
      std::make_shared<PrefixStore>(std::move(store),
                                    absl::StrCat("intra/", plan.host, "/")),
      "shm/", plan.local_index, intra_options, *std::move(setup));

  // 3. The members with this local index, one per host, in host order.
  *step = "inter-host split";
  DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> inter,
                           flat.Split(plan.local_index, plan.host));
  if (inter == nullptr) {
    return absl::InternalError("two_level: the inter-host split gave no group");
  }
  levels.inter = std::move(inter);
  return levels;
}

}  // namespace two_level_internal
}  // namespace devmesh
