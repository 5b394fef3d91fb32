// devmesh/comm/auto_group.cc
#include "comm/auto_group.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "comm/two_level/two_level_communicator.h"
#include "comm/two_level/two_level_plan.h"
#include "config/settings.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

// True when the keys do not tell the members apart (none known, or all
// equal and known): "auto" tries shared memory.
bool MaybeOneHost(absl::Span<const std::string> member_hosts) {
  for (const std::string& key : member_hosts) {
    if (key.empty() || key != member_hosts[0]) return false;
  }
  return true;
}

// True when every member's host is known.
bool AllKnown(absl::Span<const std::string> member_hosts) {
  for (const std::string& key : member_hosts) {
    if (key.empty()) return false;
  }
  return !member_hosts.empty();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGroupCommunicator(
    absl::string_view backend, std::shared_ptr<Store> store, int rank,
    int size, const CommOptions& options,
    absl::Span<const std::string> member_hosts) {
  if (backend != "auto" && backend != "shm") {
    return CreateCommunicator(backend, std::move(store), rank, size, options);
  }
  // One host key is never taken as proof: the set-up checks the segment.
  if (backend == "shm" || MaybeOneHost(member_hosts)) {
    ShmOptions shm;
    shm.require = backend == "shm";
    auto made = CreateShmGroup(store, rank, size, options, shm);
    if (!made.ok() || *made != nullptr) return made;
  }
  // Across hosts: DEVMESH_CROSS_HOST_BACKEND and DEVMESH_TWO_LEVEL.
  const Settings& settings = ProcessSettings();
  const char* cross = CrossHostBackendName(settings);
  // Before a two-level group's members wait for a leader that could not
  // make its cross-host group: every member fails alike, at once.
  DEVMESH_RETURN_IF_ERROR(CheckBackendLinked(cross));
  if (backend == "auto" && settings.two_level.value_or(kTwoLevelByDefault) &&
      AllKnown(member_hosts) && PlanTwoLevel(member_hosts, rank).has_value()) {
    return CreateTwoLevelCommunicator(std::move(store), rank, size, options,
                                      member_hosts, cross);
  }
  return CreateCommunicator(cross, std::move(store), rank, size, options);
}

std::string DefaultGroupBackendFor(absl::string_view device_type) {
  if (device_type == "cpu") return "auto";
  return RegisteredDefaultBackendFor(device_type);
}

std::string BackendKnownBeforeCreation(absl::string_view backend,
                                       bool members_apart) {
  if (backend == "auto" && members_apart) {
    return CrossHostBackendName(ProcessSettings());
  }
  return std::string(backend);
}

std::string CallCheckerBackend(bool members_apart) {
  return members_apart ? CrossHostBackendName(Settings()) : "auto";
}

absl::Status CheckGroupBackendLinked(absl::string_view backend) {
  return CheckBackendLinked(backend == "auto" || backend == "shm"
                                ? CrossHostBackendName(ProcessSettings())
                                : backend);
}

std::string GroupBackendChoicesText() {
  return absl::StrCat("\"auto\", ", BackendChoicesText());
}

}  // namespace devmesh
