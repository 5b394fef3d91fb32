#include "device_mesh/cancellable_store.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace devmesh {
namespace {

const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// `call(wait)` in slices until it answers, the caller's `timeout` passes (the
// last slice's result is returned) or `cancel` says stop.
template <typename Call>
auto Sliced(absl::Duration timeout, absl::Duration slice,
            const CancellableStore::CancelCheck& cancel, Call call)
    -> decltype(call(absl::ZeroDuration())) {
  if (cancel) {
    if (absl::Status c = cancel(); !c.ok()) return c;
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left =
        std::max(absl::ZeroDuration(), deadline - absl::Now());
    auto result = call(std::min(left, slice));
    const absl::Status& s = StatusOf(result);
    if (s.code() != absl::StatusCode::kDeadlineExceeded ||
        absl::Now() >= deadline) {
      return result;
    }
    if (cancel) {
      if (absl::Status c = cancel(); !c.ok()) return c;
    }
  }
}

}  // namespace

CancellableStore::CancellableStore(std::shared_ptr<Store> base,
                                   absl::Duration slice, CancelCheck cancel)
    : base_(std::move(base)),
      slice_(slice > absl::ZeroDuration() ? slice : absl::Seconds(1)),
      cancel_(std::move(cancel)) {}

absl::StatusOr<std::string> CancellableStore::Get(absl::string_view key,
                                                  absl::Duration timeout) {
  return Sliced(timeout, slice_, cancel_, [&](absl::Duration wait) {
    return base_->Get(key, wait);
  });
}

absl::Status CancellableStore::Wait(absl::Span<const std::string> keys,
                                    absl::Duration timeout) {
  return Sliced(timeout, slice_, cancel_, [&](absl::Duration wait) {
    return base_->Wait(keys, wait);
  });
}

absl::StatusOr<std::vector<std::string>> CancellableStore::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  return Sliced(timeout, slice_, cancel_, [&](absl::Duration wait) {
    return base_->MultiGet(keys, wait);
  });
}

}  // namespace devmesh
