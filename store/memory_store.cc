#include "store/memory_store.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"
#include "store/store_limits.h"

namespace devmesh {

absl::Status InMemoryStore::Set(absl::string_view key,
                                absl::string_view value) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(value));
  sync_internal::MutexLock lock(&mu_);
  table_.Set(key, value);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status InMemoryStore::AwaitKeys(absl::Span<const std::string> keys,
                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (const std::string& key : keys) {
    bool found = table_.Contains(key);
    while (!found) {
      const absl::Time now = absl::Now();
      if (now >= deadline) break;
      // Wait in slices of at most a minute so an infinite timeout does not
      // overflow the chrono clock.
      changed_.WaitWithTimeout(&mu_,
                               std::min(deadline - now, absl::Minutes(1)));
      found = table_.Contains(key);
    }
    if (!found) {
      return absl::DeadlineExceededError(
          absl::StrCat("store key '", absl::CHexEscape(key),
                       "' was not set within ", absl::FormatDuration(timeout)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryStore::Get(absl::string_view key,
                                               absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  std::string k(key);
  sync_internal::MutexLock lock(&mu_);
  DEVMESH_RETURN_IF_ERROR(AwaitKeys({k}, timeout));
  return *table_.Find(key);
}

absl::StatusOr<int64_t> InMemoryStore::Add(absl::string_view key,
                                           int64_t delta) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  sync_internal::MutexLock lock(&mu_);
  absl::StatusOr<int64_t> sum = table_.Add(key, delta);
  changed_.SignalAll();
  return sum;
}

absl::StatusOr<std::string> InMemoryStore::CompareSet(
    absl::string_view key, absl::string_view expected,
    absl::string_view desired) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(expected));
  DEVMESH_RETURN_IF_ERROR(ValidateValue(desired));
  sync_internal::MutexLock lock(&mu_);
  bool created = false;
  std::string result = table_.CompareSet(key, expected, desired, &created);
  if (created) changed_.SignalAll();
  return result;
}

absl::Status InMemoryStore::Wait(absl::Span<const std::string> keys,
                                 absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  sync_internal::MutexLock lock(&mu_);
  return AwaitKeys(keys, timeout);
}

absl::StatusOr<bool> InMemoryStore::Check(absl::Span<const std::string> keys) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  sync_internal::MutexLock lock(&mu_);
  for (const std::string& key : keys) {
    if (!table_.Contains(key)) return false;
  }
  return true;
}

absl::StatusOr<bool> InMemoryStore::DeleteKey(absl::string_view key) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(key));
  sync_internal::MutexLock lock(&mu_);
  return table_.Delete(key);
}

absl::StatusOr<int64_t> InMemoryStore::DeletePrefix(absl::string_view prefix) {
  DEVMESH_RETURN_IF_ERROR(ValidateKey(prefix));
  sync_internal::MutexLock lock(&mu_);
  return table_.DeletePrefix(prefix);
}

absl::StatusOr<int64_t> InMemoryStore::NumKeys() {
  sync_internal::MutexLock lock(&mu_);
  return table_.size();
}

absl::StatusOr<std::vector<std::string>> InMemoryStore::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(ValidateKeys(keys));
  sync_internal::MutexLock lock(&mu_);
  DEVMESH_RETURN_IF_ERROR(AwaitKeys(keys, timeout));
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(*table_.Find(key));
  return values;
}

absl::Status InMemoryStore::MultiSet(absl::Span<const std::string> keys,
                                     absl::Span<const std::string> values) {
  DEVMESH_RETURN_IF_ERROR(ValidateMultiSet(keys, values));
  sync_internal::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) table_.Set(keys[i], values[i]);
  changed_.SignalAll();
  return absl::OkStatus();
}

}  // namespace devmesh
