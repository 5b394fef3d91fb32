#include "store/store_limits.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {

absl::Status ValidateKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("store key is empty");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store key '", absl::CHexEscape(key.substr(0, 32)), "...' is ",
        key.size(), " bytes; the limit is ", kMaxKeyBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view value) {
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store value is ", value.size(),
                     " bytes; the limit is ", kMaxValueBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateKeys(absl::Span<const std::string> keys) {
  if (keys.size() > kMaxKeysPerCall) {
    return absl::InvalidArgumentError(
        absl::StrCat("a store call got ", keys.size(),
                     " keys; the limit is ", kMaxKeysPerCall));
  }
  for (const std::string& key : keys) {
    DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  }
  return absl::OkStatus();
}

absl::Status ValidateMultiSet(absl::Span<const std::string> keys,
                              absl::Span<const std::string> values) {
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MultiSet got ", keys.size(), " keys but ", values.size(),
                     " values"));
  }
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  for (const std::string& value : values) {
    DEVMESH_RETURN_IF_ERROR(ValidateValue(value));
  }
  return absl::OkStatus();
}

}  // namespace devmesh
