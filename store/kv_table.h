// devmesh/store/kv_table.h
// -----------------------------------------------------------------------------
// KvTable: the key-value semantics of the Store (c10d's rules for Add and
// CompareSet) without locking or waiting. InMemoryStore wraps it in a mutex;
// the TCP store server owns one on its event-loop thread. Keys and values are
// assumed valid (callers check store_limits.h first).
//
// Thread-safety: none; the owner serialises access.
#ifndef DEVMESH_STORE_KV_TABLE_H_
#define DEVMESH_STORE_KV_TABLE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

class KvTable {
 public:
  // Sets `key`; returns true when the key was missing before.
  bool Set(absl::string_view key, absl::string_view value);
  // The value of `key`, or nullptr when missing. Valid until the next change.
  const std::string* Find(absl::string_view key) const;
  bool Contains(absl::string_view key) const { return Find(key) != nullptr; }
  // Adds `delta` to the decimal int64 at `key` (missing = 0); returns the new
  // value. InvalidArgument when the value is not a decimal int64 or on
  // overflow; the table is unchanged then.
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta);
  // Store::CompareSet's rule; returns the value after the call. `*created` is
  // set to true when the key was missing and is now set.
  std::string CompareSet(absl::string_view key, absl::string_view expected,
                         absl::string_view desired, bool* created);
  // c10d's APPEND: appends `value` to the value at `key`, or creates the key
  // with `value`; returns true when the key was missing before.
  // InvalidArgument (table unchanged) when the result would be longer than
  // kMaxValueBytes (store_limits.h; torch's servers have no such limit).
  absl::StatusOr<bool> Append(absl::string_view key, absl::string_view value);
  // Deletes `key`; returns whether it existed.
  bool Delete(absl::string_view key);
  // Deletes every key that begins with `prefix`; returns how many.
  int64_t DeletePrefix(absl::string_view prefix);
  // Every key, sorted bytewise. Views valid until the next change.
  std::vector<absl::string_view> Keys() const;
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_KV_TABLE_H_
