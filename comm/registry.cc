// devmesh/comm/registry.cc
#include "comm/registry.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/shm/shm_communicator.h"
#include "comm/ucx/ucx_communicator.h"
#include "config/settings.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace {

struct Registry {
  sync_internal::Mutex mu;
  absl::flat_hash_map<std::string, CommunicatorFactory> factories
      ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry();
    sync_internal::MutexLock lock(&r->mu);  // not shared yet: for the analysis
    r->factories.emplace("gloo", &CreateGlooCommunicator);
    r->factories.emplace("nccl", &CreateNcclCommunicator);
    r->factories.emplace("shm", &CreateShmCommunicator);
    r->factories.emplace("ucx", &CreateUcxCommunicator);
    return r;
  }();
  return *registry;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    absl::string_view backend, std::shared_ptr<Store> store, int rank,
    int size, const CommOptions& options) {
  DEVMESH_RETURN_IF_ERROR(ProcessSettingsStatus());
  CommunicatorFactory factory;
  {
    Registry& registry = GetRegistry();
    sync_internal::MutexLock lock(&registry.mu);
    auto it = registry.factories.find(backend);
    if (it != registry.factories.end()) factory = it->second;
  }
  if (!factory) {
    return absl::NotFoundError(
        absl::StrCat("unknown communicator backend \"", backend,
                     "\"; known: ", absl::StrJoin(KnownBackends(), ", ")));
  }
  return factory(std::move(store), rank, size, options);
}

absl::Status RegisterBackend(absl::string_view name,
                             CommunicatorFactory factory) {
  if (name.empty()) {
    return absl::InvalidArgumentError("backend name is empty");
  }
  if (!factory) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend \"", name, "\": factory is null"));
  }
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  if (!registry.factories.emplace(std::string(name), std::move(factory))
           .second) {
    return absl::AlreadyExistsError(
        absl::StrCat("backend \"", name, "\" is already registered"));
  }
  return absl::OkStatus();
}

std::vector<std::string> KnownBackends() {
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  std::vector<std::string> names;
  for (const auto& entry : registry.factories) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace devmesh
