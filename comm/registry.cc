// devmesh/comm/registry.cc
#include "comm/registry.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/backend_registration.h"
#include "config/settings.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace {

struct Entry {
  CommunicatorFactory factory;
  BackendOptionsCodec options;
};

struct Registry {
  sync_internal::Mutex mu;
  absl::flat_hash_map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
};

// Made on first use, with devmesh's backends that are linked into the
// program (comm/backend_registration.h): a lookup finds them whatever the
// order of static initialization.
Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry();
    sync_internal::MutexLock lock(&r->mu);  // not shared yet: for the analysis
    for (comm_internal::BackendList (*hook)() :
         {&comm_internal::BuiltinBackends, &comm_internal::GlooBackends}) {
      if (hook == nullptr) continue;  // that target is not linked
      for (comm_internal::BackendRegistration& b : hook()) {
        r->entries.emplace(std::move(b.name),
                           Entry{std::move(b.factory), std::move(b.options)});
      }
    }
    return r;
  }();
  return *registry;
}

// devmesh's backends that a program links only when it names their target.
struct OptInBackend {
  const char* name;
  const char* target;
};
constexpr OptInBackend kOptInBackends[] = {
    {"gloo", "@devmesh//comm:gloo"},
};

// NotFound for a name not registered (CheckBackendLinked's text).
absl::Status NotLinkedError(absl::string_view backend) {
  const std::string known = absl::StrJoin(KnownBackends(), ", ");
  for (const OptInBackend& opt_in : kOptInBackends) {
    if (backend == opt_in.name) {
      return absl::NotFoundError(absl::StrCat(
          "backend \"", backend, "\" is not linked into this program: add \"",
          opt_in.target, "\" to its deps (linked: ", known, ")"));
    }
  }
  return absl::NotFoundError(absl::StrCat("unknown communicator backend \"",
                                          backend, "\"; known: ", known));
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
    auto it = registry.entries.find(backend);
    if (it != registry.entries.end()) factory = it->second.factory;
  }
  if (!factory) return NotLinkedError(backend);
  return factory(std::move(store), rank, size, options);
}

absl::Status RegisterBackend(absl::string_view name,
                             CommunicatorFactory factory,
                             BackendOptionsCodec options) {
  if (name.empty()) {
    return absl::InvalidArgumentError("backend name is empty");
  }
  if (!factory) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend \"", name, "\": factory is null"));
  }
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  if (!registry.entries
           .emplace(std::string(name),
                    Entry{std::move(factory), std::move(options)})
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
  for (const auto& entry : registry.entries) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status CheckBackendLinked(absl::string_view backend) {
  {
    Registry& registry = GetRegistry();
    sync_internal::MutexLock lock(&registry.mu);
    if (registry.entries.contains(backend)) return absl::OkStatus();
  }
  return NotLinkedError(backend);
}

namespace {

// The codec registered with `backend`; nullopt when it is not registered.
std::optional<BackendOptionsCodec> FindCodec(absl::string_view backend) {
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  auto it = registry.entries.find(backend);
  if (it == registry.entries.end()) return std::nullopt;
  return it->second.options;
}

}  // namespace

std::vector<OptionField> AgreedOptionFields(absl::string_view backend,
                                            const CommOptions& options) {
  std::optional<BackendOptionsCodec> codec = FindCodec(backend);
  if (!codec.has_value() || !codec->agreed_fields) return {};
  return codec->agreed_fields(options);
}

absl::Status SetAgreedOptionFields(absl::string_view backend,
                                   absl::Span<const OptionField> fields,
                                   CommOptions* options) {
  std::optional<BackendOptionsCodec> codec = FindCodec(backend);
  if (!codec.has_value()) return NotLinkedError(backend);
  if (!codec->set_agreed_fields) {
    if (fields.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("backend \"", backend,
                     "\" has no agreed option fields, got ", fields.size()));
  }
  return codec->set_agreed_fields(fields, options);
}

std::string LocalOptionFields(absl::string_view backend,
                              const CommOptions& options) {
  std::optional<BackendOptionsCodec> codec = FindCodec(backend);
  if (!codec.has_value() || !codec->local_fields) return "";
  return codec->local_fields(options);
}

absl::Status FillLocalOptionDefaults(absl::string_view backend,
                                     const LocalPlace& place,
                                     CommOptions* options) {
  std::optional<BackendOptionsCodec> codec = FindCodec(backend);
  if (!codec.has_value() || !codec->fill_local_defaults) {
    return absl::OkStatus();
  }
  return codec->fill_local_defaults(place, options);
}

absl::Status PrepareThreadFor(absl::string_view backend,
                              const LocalPlace& place) {
  std::optional<BackendOptionsCodec> codec = FindCodec(backend);
  if (!codec.has_value() || !codec->prepare_thread) return absl::OkStatus();
  return codec->prepare_thread(place);
}

}  // namespace devmesh
