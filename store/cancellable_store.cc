// devmesh/device_mesh/cancellable_store.cc
#include "store/cancellable_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

template <typename T>
absl::StatusOr<T> WithStatus(absl::StatusOr<T> r, absl::Status s) {
  if (!s.ok()) return s;
  return r;
}
absl::Status WithStatus(const absl::Status&, absl::Status s) { return s; }

// `call(wait)` in slices until it answers, the caller's `timeout` passes or
// `cancel` says stop. At the caller's deadline the last slice's
// DeadlineExceeded is returned with the whole timeout added to its message
// (the base store names only the slice's wait). A slice that ends with
// DeadlineExceeded well before its wait (a store that fails fast) ends the
// call as it is, rather than spinning.
template <typename Call>
auto Sliced(absl::Duration timeout, absl::Duration slice,
            const CancellableStore::CancelCheck& cancel, Call call)
    -> decltype(call(absl::ZeroDuration())) {
  if (cancel) {
    DEVMESH_RETURN_IF_ERROR(cancel());
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Time start = absl::Now();
    const absl::Duration wait =
        std::min(std::max(absl::ZeroDuration(), deadline - start), slice);
    auto result = call(wait);
    const absl::Status& s = StatusOf(result);
    if (s.code() != absl::StatusCode::kDeadlineExceeded) return result;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return WithStatus(
          std::move(result),
          absl::DeadlineExceededError(absl::StrCat(
              s.message(), " (the call's timeout: ",
              absl::FormatDuration(timeout), ", waited in slices of ",
              absl::FormatDuration(slice), ")")));
    }
    if (now - start < wait / 2) return result;
    if (cancel) {
      DEVMESH_RETURN_IF_ERROR(cancel());
    }
  }
}

}  // namespace

CancellableStore::CancellableStore(std::shared_ptr<Store> base,
                                   absl::Duration slice, CancelCheck cancel)
    : ForwardingStore(std::move(base)),
      slice_(slice > absl::ZeroDuration() ? slice : absl::Seconds(1)),
      cancel_(std::move(cancel)) {}

absl::StatusOr<std::string> CancellableStore::Get(absl::string_view key,
                                                  absl::Duration timeout) {
  return Sliced(timeout, slice_, cancel_, [&](absl::Duration wait) {
    return base()->Get(key, wait);
  });
}

absl::Status CancellableStore::Wait(absl::Span<const std::string> keys,
                                    absl::Duration timeout) {
  return Sliced(timeout, slice_, cancel_, [&](absl::Duration wait) {
    return base()->Wait(keys, wait);
  });
}

absl::StatusOr<std::vector<std::string>> CancellableStore::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  return Sliced(timeout, slice_, cancel_, [&](absl::Duration wait) {
    return base()->MultiGet(keys, wait);
  });
}

}  // namespace devmesh
