#include "store/kv_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store/store_limits.h"

namespace devmesh {

bool KvTable::Set(absl::string_view key, absl::string_view value) {
  auto [it, inserted] = map_.try_emplace(key);
  it->second.assign(value.data(), value.size());
  return inserted;
}

const std::string* KvTable::Find(absl::string_view key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> KvTable::Add(absl::string_view key, int64_t delta) {
  int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end() && !absl::SimpleAtoi(it->second, &current)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Add on key '", absl::CHexEscape(key), "': its value '",
        absl::CHexEscape(it->second.substr(0, 64)),
        "' is not a decimal int64"));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Add on key '", absl::CHexEscape(key), "': ", current,
                     " + ", delta, " overflows int64"));
  }
  if (it == map_.end()) it = map_.try_emplace(key).first;
  it->second = absl::StrCat(sum);
  return sum;
}

std::string KvTable::CompareSet(absl::string_view key,
                                absl::string_view expected,
                                absl::string_view desired, bool* created) {
  *created = false;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return std::string(expected);
    map_.try_emplace(key, desired);
    *created = true;
    return std::string(desired);
  }
  if (it->second == expected) it->second.assign(desired.data(), desired.size());
  return it->second;
}

absl::StatusOr<bool> KvTable::Append(absl::string_view key,
                                     absl::string_view value) {
  auto it = map_.find(key);
  const size_t before = it == map_.end() ? 0 : it->second.size();
  if (value.size() > kMaxValueBytes - before) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Append on key '", absl::CHexEscape(key), "': ", before, " + ",
        value.size(), " bytes is over the value limit of ", kMaxValueBytes,
        " bytes"));
  }
  if (it == map_.end()) {
    map_.try_emplace(key, value);
    return true;
  }
  it->second.append(value.data(), value.size());
  return false;
}

std::vector<absl::string_view> KvTable::Keys() const {
  std::vector<absl::string_view> keys;
  keys.reserve(map_.size());
  for (const auto& [key, value] : map_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

bool KvTable::Delete(absl::string_view key) {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  map_.erase(it);
  return true;
}

int64_t KvTable::DeletePrefix(absl::string_view prefix) {
  int64_t n = 0;
  for (auto it = map_.begin(); it != map_.end();) {
    if (absl::StartsWith(it->first, prefix)) {
      map_.erase(it++);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

}  // namespace devmesh
