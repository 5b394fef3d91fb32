// devmesh/store/store_limits.h
// -----------------------------------------------------------------------------
// The limits every Store implementation enforces, and the checks that turn a
// violation into an InvalidArgument naming the bad value. The TCP store's wire
// format enforces the same limits on the server side, so a client and an
// in-memory store reject exactly the same input.
//
// Thread-safety: pure functions.
#ifndef DEVMESH_STORE_STORE_LIMITS_H_
#define DEVMESH_STORE_STORE_LIMITS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace devmesh {

// A key is 1 to kMaxKeyBytes bytes long (any bytes).
inline constexpr size_t kMaxKeyBytes = 4096;
// A value is 0 to kMaxValueBytes bytes long.
inline constexpr size_t kMaxValueBytes = size_t{16} << 20;  // 16 MiB
// Wait, Check, MultiGet and MultiSet take at most kMaxKeysPerCall keys.
inline constexpr size_t kMaxKeysPerCall = size_t{1} << 20;

// InvalidArgument when `key` is empty or longer than kMaxKeyBytes.
absl::Status ValidateKey(absl::string_view key);
// InvalidArgument when `value` is longer than kMaxValueBytes.
absl::Status ValidateValue(absl::string_view value);
// ValidateKey on each key, and InvalidArgument when there are more than
// kMaxKeysPerCall of them.
absl::Status ValidateKeys(absl::Span<const std::string> keys);
// The checks of Store::MultiSet: as many values as keys (InvalidArgument
// naming both counts), ValidateKeys, ValidateValue on each value.
absl::Status ValidateMultiSet(absl::Span<const std::string> keys,
                              absl::Span<const std::string> values);

}  // namespace devmesh

#endif  // DEVMESH_STORE_STORE_LIMITS_H_
