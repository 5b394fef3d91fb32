// devmesh/store/etcd_json.h
// -----------------------------------------------------------------------------
// The JSON of etcd's v3 gateway as EtcdStore reads and writes it: proto3's
// JSON mapping, so int64 fields are strings ("revision": "7"), bytes fields
// (keys, values) are base64, and fields that hold their default (0, "",
// false, an empty list) are left out. The readers below take an absent field
// as that default and never throw.
//
// Thread-safety: plain functions; nothing is shared.
#ifndef DEVMESH_STORE_ETCD_JSON_H_
#define DEVMESH_STORE_ETCD_JSON_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

// clang-format off
// clang-format on

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace devmesh {
namespace etcd_internal {

// j[field] when j is an object that has it, else a null.
const nlohmann::json& Field(const nlohmann::json& j, const char* field);

// An int64 field (a string, or a number); 0 when absent or not a number.
int64_t Int64(const nlohmann::json& j, const char* field);

// A bool field; false when absent.
bool Bool(const nlohmann::json& j, const char* field);

// A bytes field, decoded; "" when absent. Internal when it is not base64.
absl::StatusOr<std::string> Bytes(const nlohmann::json& j, const char* field);

// The range_end that, with key = `prefix`, covers every key starting with
// `prefix`: the prefix with its last byte below 0xff incremented (the 0xff
// bytes after it dropped); "\0" (to the end of the key space) when there is
// none: PrefixEnd("a/") == "a0", PrefixEnd("a\xff") == "b".
std::string PrefixEnd(std::string prefix);

// Txn operations: {"request_range": {...}} and {"request_put": {...}}.
nlohmann::json RangeOp(absl::string_view key, bool count_only);
nlohmann::json PutOp(absl::string_view key, absl::string_view value);

// The first key of a RangeResponse ("kvs"[0]): found or not, its value and
// mod_revision.
struct Kv {
  bool found = false;
  std::string value;
  int64_t mod_revision = 0;
};
absl::StatusOr<Kv> FirstKv(const nlohmann::json& range_response);

}  // namespace etcd_internal
}  // namespace devmesh

#endif  // DEVMESH_STORE_ETCD_JSON_H_
