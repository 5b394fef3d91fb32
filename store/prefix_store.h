// devmesh/store/prefix_store.h
// -----------------------------------------------------------------------------
// PrefixStore: a namespace over another Store (one per process group), like
// c10d's PrefixStore and Gloo's PrefixStore. Every key `k` becomes
// `prefix + "/" + k` in the base store; values and errors pass through
// unchanged (an error message names the full, prefixed key). NumKeys counts
// the whole base store, as in c10d. Prefix stores nest: a PrefixStore over a
// PrefixStore("a") with prefix "b" maps "k" to "a/b/k".
//
// Thread-safety: as thread-safe as the base store; holds no state of its own
// besides the prefix. The base is shared (kept alive by the shared_ptr).
#ifndef DEVMESH_STORE_PREFIX_STORE_H_
#define DEVMESH_STORE_PREFIX_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace devmesh {

class PrefixStore : public Store {
 public:
  // `base` must not be null. `prefix` may be any string (an empty prefix maps
  // "k" to "/k").
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& base() const { return base_; }

  absl::Duration default_timeout() const override {
    return base_->default_timeout();
  }
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> DeletePrefix(absl::string_view prefix) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  using Store::Get;
  using Store::Wait;

 private:
  std::string Key(absl::string_view key) const;
  std::vector<std::string> Keys(absl::Span<const std::string> keys) const;

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_PREFIX_STORE_H_
