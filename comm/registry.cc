// devmesh/comm/registry.cc
#include "comm/registry.h"

#include <algorithm>
#include <optional>
#include <typeindex>
#include <typeinfo>
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
  BackendTraits traits;
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
                           Entry{std::move(b.factory), std::move(b.options),
                                 std::move(b.traits)});
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
                             BackendOptionsCodec options,
                             BackendTraits traits) {
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
                    Entry{std::move(factory), std::move(options),
                          std::move(traits)})
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

BackendTraits TraitsOf(absl::string_view backend) {
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  auto it = registry.entries.find(backend);
  if (it == registry.entries.end()) return BackendTraits();
  return it->second.traits;
}

std::string RegisteredDefaultBackendFor(absl::string_view device_type) {
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  std::string found;
  for (const auto& [name, entry] : registry.entries) {
    const std::vector<std::string>& types =
        entry.traits.default_for_device_types;
    if (std::find(types.begin(), types.end(), device_type) == types.end()) {
      continue;
    }
    if (found.empty() || name < found) found = name;  // first by name
  }
  return found;
}

bool NeedsPreparedThread(absl::string_view backend) {
  std::optional<BackendOptionsCodec> codec = FindCodec(backend);
  return codec.has_value() && codec->prepare_thread != nullptr;
}

void FillProcessFields(const LocalPlace& place, CommOptions* options) {
  std::vector<std::function<void(const LocalPlace&, CommOptions*)>> fills;
  {
    Registry& registry = GetRegistry();
    sync_internal::MutexLock lock(&registry.mu);
    for (const auto& [name, entry] : registry.entries) {
      if (entry.options.fill_process_fields) {
        fills.push_back(entry.options.fill_process_fields);
      }
    }
  }
  for (const auto& fill : fills) fill(place, options);  // outside the lock
}

std::string BackendReadingOptions(std::type_index options_type) {
  // void: the mark of a codec that reads none.
  if (options_type == std::type_index(typeid(void))) return "";
  Registry& registry = GetRegistry();
  sync_internal::MutexLock lock(&registry.mu);
  std::string found;
  for (const auto& [name, entry] : registry.entries) {
    if (entry.options.typed_options != options_type) continue;
    if (found.empty() || name < found) found = name;  // first by name
  }
  return found;
}

std::string BackendChoicesText() {
  std::vector<std::string> choices;
  for (const std::string& name : KnownBackends()) {
    choices.push_back(absl::StrCat("\"", name, "\""));
  }
  for (const OptInBackend& opt_in : kOptInBackends) {
    if (CheckBackendLinked(opt_in.name).ok()) continue;
    choices.push_back(absl::StrCat("\"", opt_in.name, "\" with ",
                                   opt_in.target, " linked"));
  }
  if (choices.size() < 2) return absl::StrJoin(choices, "");
  const std::string last = choices.back();
  choices.pop_back();
  return absl::StrCat(absl::StrJoin(choices, ", "), ", or ", last);
}

}  // namespace devmesh
