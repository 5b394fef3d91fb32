// devmesh/device_mesh/counting_store.h
// -----------------------------------------------------------------------------
// CountingStore: a Store decorator that counts calls, each of which is one
// round trip to a TCP store, and the payload bytes they move (keys and
// values sent, values received; not the wire framing). //bench:group_creation
// and the group-creation counting test report them per rank. Thread-safe:
// the counters are atomic; calls forward to the base store.
#ifndef DEVMESH_DEVICE_MESH_COUNTING_STORE_H_
#define DEVMESH_DEVICE_MESH_COUNTING_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/forwarding_store.h"
#include "store/store.h"

namespace devmesh {

class CountingStore : public ForwardingStore {
 public:
  explicit CountingStore(std::shared_ptr<Store> base)
      : ForwardingStore(std::move(base)) {}
  // A view over `base` whose calls are counted in `sink`'s counters (its own
  // stay 0): one count per call made through the view, however `base`
  // carries it out (a CancellableStore's wait in slices is one call).
  CountingStore(std::shared_ptr<Store> base, std::shared_ptr<CountingStore> sink)
      : ForwardingStore(std::move(base)), sink_(std::move(sink)) {}

  // base(): the decorated store (calls on it are not counted).
  // Calls made so far through this decorator.
  int64_t round_trips() const { return calls_.load(std::memory_order_relaxed); }
  // Payload bytes moved so far: every key and value sent plus every value
  // received (a failed call counts what it sent).
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    Count(key.size() + value.size());
    return base()->Set(key, value);
  }
  using Store::Get;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    Count(key.size());
    auto value = base()->Get(key, timeout);
    if (value.ok()) Count(value->size(), /*call=*/false);
    return value;
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    Count(key.size() + sizeof(delta));
    return base()->Add(key, delta);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    Count(key.size() + expected.size() + desired.size());
    auto value = base()->CompareSet(key, expected, desired);
    if (value.ok()) Count(value->size(), /*call=*/false);
    return value;
  }
  using Store::Wait;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    Count(KeyBytes(keys));
    return base()->Wait(keys, timeout);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    Count(KeyBytes(keys));
    return base()->Check(keys);
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override {
    Count(key.size());
    return base()->DeleteKey(key);
  }
  absl::StatusOr<int64_t> NumKeys() override {
    Count(0);
    return base()->NumKeys();
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override {
    Count(KeyBytes(keys));
    auto values = base()->MultiGet(keys, timeout);
    if (values.ok()) Count(KeyBytes(*values), /*call=*/false);
    return values;
  }
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    Count(KeyBytes(keys) + KeyBytes(values));
    return base()->MultiSet(keys, values);
  }

 private:
  void Count(size_t bytes, bool call = true) {
    CountingStore& to = sink_ != nullptr ? *sink_ : *this;
    if (call) to.calls_.fetch_add(1, std::memory_order_relaxed);
    to.bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  static size_t KeyBytes(absl::Span<const std::string> strings) {
    size_t n = 0;
    for (const std::string& s : strings) n += s.size();
    return n;
  }

  std::shared_ptr<CountingStore> sink_;  // null: count here
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> bytes_{0};
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_COUNTING_STORE_H_
