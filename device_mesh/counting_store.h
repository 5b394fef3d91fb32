// devmesh/device_mesh/counting_store.h
// -----------------------------------------------------------------------------
// CountingStore: a Store decorator that counts calls, each of which is one
// round trip to a TCP store. //bench:group_creation reports the count per
// rank. Thread-safe: the counter is atomic; calls forward to the base store.
#ifndef DEVMESH_DEVICE_MESH_COUNTING_STORE_H_
#define DEVMESH_DEVICE_MESH_COUNTING_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace devmesh {

class CountingStore : public Store {
 public:
  explicit CountingStore(std::shared_ptr<Store> base) : base_(std::move(base)) {}

  // Calls made so far through this decorator.
  int64_t round_trips() const { return calls_.load(std::memory_order_relaxed); }

  absl::Duration default_timeout() const override {
    return base_->default_timeout();
  }
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    Count();
    return base_->Set(key, value);
  }
  using Store::Get;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    Count();
    return base_->Get(key, timeout);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    Count();
    return base_->Add(key, delta);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    Count();
    return base_->CompareSet(key, expected, desired);
  }
  using Store::Wait;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    Count();
    return base_->Wait(keys, timeout);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    Count();
    return base_->Check(keys);
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override {
    Count();
    return base_->DeleteKey(key);
  }
  absl::StatusOr<int64_t> NumKeys() override {
    Count();
    return base_->NumKeys();
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override {
    Count();
    return base_->MultiGet(keys, timeout);
  }
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    Count();
    return base_->MultiSet(keys, values);
  }

 private:
  void Count() { calls_.fetch_add(1, std::memory_order_relaxed); }

  std::shared_ptr<Store> base_;
  std::atomic<int64_t> calls_{0};
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_COUNTING_STORE_H_
