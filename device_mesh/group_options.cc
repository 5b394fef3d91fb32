#include "device_mesh/group_options.h"

#include <algorithm>
#include <map>
#include <typeindex>
#include <typeinfo>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/auto_group.h"
#include "comm/option_fields.h"
#include "comm/registry.h"
#include "status/status_macros.h"

namespace devmesh {

GroupOptions MeshOptions::For(absl::string_view dim_group_name) const {
  GroupOptions out = all;
  auto it = per_dim.find(dim_group_name);
  if (it == per_dim.end()) return out;
  if (!it->second.backend.empty()) out.backend = it->second.backend;
  if (it->second.timeout.has_value()) out.timeout = it->second.timeout;
  device_mesh_internal::MergeTypedOptions(it->second, &out);
  if (it->second.verify_calls.has_value()) {
    out.verify_calls = it->second.verify_calls;
  }
  return out;
}

std::string GroupOptionsString(const GroupOptions& g) {
  std::string out = absl::StrCat(
      "{backend=", g.backend.empty() ? "unset" : g.backend, ", timeout=",
      g.timeout.has_value() ? absl::FormatDuration(*g.timeout) : "unset");
  for (const device_mesh_internal::TypedBackendOptions& t :
       device_mesh_internal::TypedOptionsOf(g)) {
    absl::StrAppend(&out, ", ", t.backend, "=");
    if (!t.set) {
      absl::StrAppend(&out, "unset");
    } else {
      absl::StrAppend(
          &out, "{",
          OptionFieldsString(AgreedOptionFields(t.backend, t.options)), "}");
    }
  }
  out += "}";
  if (g.verify_calls.value_or(false)) {
    out.insert(out.size() - 1, ", verify_calls=on");
  }
  return out;
}

bool SameGroupOptions(const GroupOptions& a, const GroupOptions& b) {
  return GroupOptionsString(a) == GroupOptionsString(b);
}

absl::Status CheckGroupTimeout(const GroupOptions& g, absl::string_view where) {
  if (g.timeout.has_value() && *g.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " timeout (", absl::FormatDuration(*g.timeout),
                     ") must be positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MeshOptions> ValidateMeshOptions(
    MeshOptions options, const std::vector<std::string>& dim_group_names,
    const std::vector<std::string>& extra_names) {
  DEVMESH_RETURN_IF_ERROR(CheckGroupTimeout(options.all, "MeshOptions.all"));
  const std::string valid = absl::StrCat(
      "(", absl::StrJoin(dim_group_names, ", "), ")");
  // Sorted keys: the error names the same key whatever the hash order.
  std::vector<std::string> keys;
  for (const auto& [key, unused] : options.per_dim) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  MeshOptions out;
  out.all = options.all;
  std::map<std::string, std::string> key_of;  // group name -> key given
  for (const std::string& key : keys) {
    const GroupOptions& g = options.per_dim.at(key);
    const std::string where = absl::StrCat("MeshOptions.per_dim['", key, "']");
    DEVMESH_RETURN_IF_ERROR(CheckGroupTimeout(g, where));
    std::string dim_name;
    auto own = std::find(dim_group_names.begin(), dim_group_names.end(), key);
    int64_t index = 0;
    if (own != dim_group_names.end()) {
      dim_name = key;
    } else if (std::find(extra_names.begin(), extra_names.end(), key) !=
               extra_names.end()) {
      dim_name = key;
    } else if (absl::StartsWith(key, "dim_") &&
               absl::SimpleAtoi(absl::string_view(key).substr(4), &index) &&
               absl::StrCat("dim_", index) == key) {
      if (index < 0 || index >= static_cast<int64_t>(dim_group_names.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": dim index ", index, " is out of range for a ",
            dim_group_names.size(), "-d mesh ", valid));
      }
      dim_name = dim_group_names[index];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": '", key, "' is not a dim of the mesh ", valid,
          " (nor \"dim_<i>\"): the override would never apply"));
    }
    auto [it, fresh] = key_of.emplace(dim_name, key);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": dim '", dim_name, "' already has options under key '",
          it->second, "': give one key per dim"));
    }
    out.per_dim[dim_name] = g;
  }
  return out;
}

namespace device_mesh_internal {

namespace {

// Calls visit(member, slot) for each typed backend-options member of
// GroupOptions (`member`, a pointer to it) with the CommOptions member
// `slot` that holds the same type, in serialization order. The one list of
// GroupOptions' typed members: a new one is one line here (and goes last).
// Their backends come from the registry by type (BackendReadingOptions), so
// no backend is named here.
template <typename Visit>
void ForEachTypedMember(Visit&& visit) {
  visit(&GroupOptions::nccl, &CommOptions::nccl);
}

// The backend whose codec reads options of type T; "" when none does.
template <typename T>
std::string BackendReading() {
  return BackendReadingOptions(std::type_index(typeid(T)));
}

}  // namespace

std::vector<TypedBackendOptions> TypedOptionsOf(const GroupOptions& g) {
  std::vector<TypedBackendOptions> out;
  ForEachTypedMember([&](auto member, auto slot) {
    const auto& value = g.*member;
    using T = typename std::decay_t<decltype(value)>::value_type;
    TypedBackendOptions t;
    t.backend = BackendReading<T>();
    t.set = value.has_value();
    if (t.set) t.options.*slot = *value;
    out.push_back(std::move(t));
  });
  return out;
}

absl::Status SetTypedOptions(absl::string_view backend,
                             const CommOptions& options, GroupOptions* g) {
  bool found = false;
  ForEachTypedMember([&](auto member, auto slot) {
    using T = typename std::decay_t<decltype(g->*member)>::value_type;
    if (found || backend.empty() || backend != BackendReading<T>()) return;
    g->*member = options.*slot;
    found = true;
  });
  if (found) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "GroupOptions has no options of backend \"", backend, "\""));
}

std::optional<CommOptions> TypedCommOptions(const GroupOptions& g) {
  std::optional<CommOptions> out;
  ForEachTypedMember([&](auto member, auto slot) {
    if (!(g.*member).has_value()) return;
    if (!out.has_value()) out.emplace();
    (*out).*slot = *(g.*member);
  });
  return out;
}

void MergeTypedOptions(const GroupOptions& from, GroupOptions* into) {
  ForEachTypedMember([&](auto member, auto) {
    if ((from.*member).has_value()) into->*member = from.*member;
  });
}

}  // namespace device_mesh_internal

std::string DefaultBackendFor(absl::string_view device_type) {
  return DefaultGroupBackendFor(device_type);
}

absl::Status CheckDeviceType(absl::string_view device_type) {
  bool word = !device_type.empty();
  for (char c : device_type) word = word && absl::ascii_isalpha(c);
  if (word) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "device type '", device_type,
      "' must be a plain device type without an index: devmesh knows "
      "\"cpu\" and \"cuda\" (not \"cuda:0\")"));
}

absl::Status CheckDeviceTypeHasBackend(
    absl::string_view device_type, const MeshOptions& options,
    absl::Span<const std::string> dim_names, int ndim) {
  DEVMESH_RETURN_IF_ERROR(CheckDeviceType(device_type));
  if (!DefaultBackendFor(device_type).empty()) return absl::OkStatus();
  if (!options.all.backend.empty()) return absl::OkStatus();
  // Each dim by its name or as "dim_<i>" (R3), as ValidateMeshOptions.
  auto has_backend = [&](const std::string& key) {
    auto it = options.per_dim.find(key);
    return it != options.per_dim.end() && !it->second.backend.empty();
  };
  bool every_dim = ndim > 0;
  for (int d = 0; d < ndim && every_dim; ++d) {
    const bool named = static_cast<size_t>(d) < dim_names.size();
    every_dim = (named && has_backend(dim_names[d])) ||
                has_backend(absl::StrCat("dim_", d));
  }
  if (every_dim) return absl::OkStatus();
  const std::string lower = absl::AsciiStrToLower(device_type);
  std::string hint;
  if (lower != device_type && !DefaultBackendFor(lower).empty()) {
    hint = absl::StrCat(" (did you mean \"", lower, "\"?)");
  } else if (lower == "gpu") {
    hint = " (did you mean \"cuda\"?)";
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "device type '", device_type, "' is not one devmesh knows", hint,
      ": the device types are \"cpu\" (backend \"", DefaultBackendFor("cpu"),
      "\": shared memory within a host, else UCX) and \"cuda\" (backend \"",
      DefaultBackendFor("cuda"),
      "\"); another device type needs a backend for every dim "
      "(MeshOptions.all.backend, R19)"));
}

}  // namespace devmesh
