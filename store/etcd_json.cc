#include "store/etcd_json.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace devmesh {
namespace etcd_internal {

using Json = nlohmann::json;

const Json& Field(const Json& j, const char* field) {
  static const Json* const kNull = new Json();
  if (!j.is_object()) return *kNull;
  auto it = j.find(field);
  return it == j.end() ? *kNull : *it;
}

int64_t Int64(const Json& j, const char* field) {
  const Json& v = Field(j, field);
  int64_t out = 0;
  if (v.is_string() &&
      absl::SimpleAtoi(v.get_ref<const std::string&>(), &out)) {
    return out;
  }
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

bool Bool(const Json& j, const char* field) {
  const Json& v = Field(j, field);
  return v.is_boolean() && v.get<bool>();
}

absl::StatusOr<std::string> Bytes(const Json& j, const char* field) {
  const Json& v = Field(j, field);
  if (v.is_null()) return std::string();
  std::string out;
  if (!v.is_string() ||
      !absl::Base64Unescape(v.get_ref<const std::string&>(), &out)) {
    return absl::InternalError(
        absl::StrCat("etcd sent a '", field,
                     "' that is not base64: ", v.dump().substr(0, 100)));
  }
  return out;
}

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) != 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

Json RangeOp(absl::string_view key, bool count_only) {
  Json range = {{"key", absl::Base64Escape(key)}};
  if (count_only) range["count_only"] = true;
  return Json{{"request_range", std::move(range)}};
}

Json PutOp(absl::string_view key, absl::string_view value) {
  return Json{{"request_put",
               {{"key", absl::Base64Escape(key)},
                {"value", absl::Base64Escape(value)}}}};
}

absl::StatusOr<Kv> FirstKv(const Json& range_response) {
  Kv kv;
  const Json& kvs = Field(range_response, "kvs");
  if (!kvs.is_array() || kvs.empty()) return kv;
  kv.found = true;
  absl::StatusOr<std::string> value = Bytes(kvs[0], "value");
  if (!value.ok()) return value.status();
  kv.value = std::move(*value);
  kv.mod_revision = Int64(kvs[0], "mod_revision");
  return kv;
}

}  // namespace etcd_internal
}  // namespace devmesh
