// devmesh/comm/backend_options.cc
#include "comm/backend_options.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "comm/backend_registration.h"
#include "comm/registry.h"

namespace devmesh {

using comm_internal::FindBackendOptions;

std::vector<OptionField> AgreedOptionFields(absl::string_view backend,
                                            const CommOptions& options) {
  std::optional<BackendOptionsCodec> codec = FindBackendOptions(backend);
  if (!codec.has_value() || !codec->agreed_fields) return {};
  return codec->agreed_fields(options);
}

absl::Status SetAgreedOptionFields(absl::string_view backend,
                                   absl::Span<const OptionField> fields,
                                   CommOptions* options) {
  std::optional<BackendOptionsCodec> codec = FindBackendOptions(backend);
  if (!codec.has_value()) return CheckBackendLinked(backend);
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
  std::optional<BackendOptionsCodec> codec = FindBackendOptions(backend);
  if (!codec.has_value() || !codec->local_fields) return "";
  return codec->local_fields(options);
}

absl::Status FillLocalOptionDefaults(absl::string_view backend,
                                     const LocalPlace& place,
                                     CommOptions* options) {
  std::optional<BackendOptionsCodec> codec = FindBackendOptions(backend);
  if (!codec.has_value() || !codec->fill_local_defaults) {
    return absl::OkStatus();
  }
  return codec->fill_local_defaults(place, options);
}

absl::Status PrepareThreadFor(absl::string_view backend,
                              const LocalPlace& place) {
  std::optional<BackendOptionsCodec> codec = FindBackendOptions(backend);
  if (!codec.has_value() || !codec->prepare_thread) return absl::OkStatus();
  return codec->prepare_thread(place);
}

}  // namespace devmesh
