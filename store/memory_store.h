// devmesh/store/memory_store.h
// -----------------------------------------------------------------------------
// InMemoryStore: a Store held in this process's memory, for tests and tools
// that run ranks as threads (Gloo's HashStore plays the same role). Same
// semantics and limits as the TCP store (store.h, store_limits.h); it never
// returns Unavailable.
//
// Thread-safety: every method may be called from any number of threads; a
// waiting Get/Wait/MultiGet does not block other callers.
//
// The mutex is sync/annotated_mutex.h's (std::mutex, which TSan sees, with
// the attributes clang's -Wthread-safety checks; docs/thread_safety.md).
#ifndef DEVMESH_STORE_MEMORY_STORE_H_
#define DEVMESH_STORE_MEMORY_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <string>
#include <vector>

#include "sync/annotated_mutex.h"
#include "store/kv_table.h"
#include "store/store.h"
#include "absl/base/thread_annotations.h"

namespace devmesh {

class InMemoryStore : public Store {
 public:
  // `default_timeout` is used by the Get/Wait/MultiGet overloads without one.
  explicit InMemoryStore(absl::Duration default_timeout = absl::Seconds(300))
      : default_timeout_(default_timeout) {}

  absl::Duration default_timeout() const override { return default_timeout_; }
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
  // Waits until every key is present; DeadlineExceeded names the first missing.
  absl::Status AwaitKeys(absl::Span<const std::string> keys,
                         absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration default_timeout_;
  sync_internal::Mutex mu_;
  sync_internal::CondVar changed_;  // signalled when a key is added
  KvTable table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_MEMORY_STORE_H_
