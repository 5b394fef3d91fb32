// devmesh/store/forwarding_store.h
// -----------------------------------------------------------------------------
// ForwardingStore: a Store that hands every call to a base store unchanged.
// The base class of decorators that change a few calls and pass the rest on
// (device_mesh's CountingStore and CancellableStore, tests' fault
// injectors): a subclass overrides what it changes, and its overrides of
// Get and Wait keep Store's one-argument overloads with `using Store::Get;`
// and `using Store::Wait;`.
//
// Errors: the base store's, as they are. Thread-safety: as the base store's
// (this class holds no state of its own beyond the pointer, set once).
#ifndef DEVMESH_STORE_FORWARDING_STORE_H_
#define DEVMESH_STORE_FORWARDING_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "store/store.h"

namespace devmesh {

class ForwardingStore : public Store {
 public:
  // `base` must not be null.
  explicit ForwardingStore(std::shared_ptr<Store> base)
      : base_(std::move(base)) {}

  // The store calls go to.
  const std::shared_ptr<Store>& base() const { return base_; }

  absl::Duration default_timeout() const override {
    return base_->default_timeout();
  }
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return base_->Set(key, value);
  }
  using Store::Get;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    return base_->Get(key, timeout);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    return base_->Add(key, delta);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    return base_->CompareSet(key, expected, desired);
  }
  using Store::Wait;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    return base_->Wait(keys, timeout);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    return base_->Check(keys);
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override {
    return base_->DeleteKey(key);
  }
  absl::StatusOr<int64_t> DeletePrefix(absl::string_view prefix) override {
    return base_->DeletePrefix(prefix);
  }
  absl::StatusOr<int64_t> NumKeys() override { return base_->NumKeys(); }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override {
    return base_->MultiGet(keys, timeout);
  }
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    return base_->MultiSet(keys, values);
  }

 private:
  std::shared_ptr<Store> base_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_FORWARDING_STORE_H_
