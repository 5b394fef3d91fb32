// devmesh/comm/gloo/gloo_store.cc
#include "comm/gloo/gloo_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_status.h"

namespace devmesh {
namespace gloo_internal {

GlooStore::GlooStore(std::shared_ptr<devmesh::Store> store, std::string prefix,
                     absl::Duration timeout)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  ++round_trips_;
  absl::Status status = store_->Set(absl::StrCat(prefix_, key),
                                    absl::string_view(data.data(), data.size()));
  if (!status.ok()) throw StoreStatusError(std::move(status));
}

std::vector<char> GlooStore::get(const std::string& key) {
  ++round_trips_;
  absl::StatusOr<std::string> value =
      store_->Get(absl::StrCat(prefix_, key), timeout_);
  if (!value.ok()) throw StoreStatusError(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  ++round_trips_;
  absl::Status status = store_->Wait(Prefixed(keys), timeout_);
  if (!status.ok()) throw StoreStatusError(std::move(status));
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  ++round_trips_;
  absl::Duration d = timeout.count() > 0 ? absl::FromChrono(timeout) : timeout_;
  absl::Status status = store_->Wait(Prefixed(keys), d);
  if (!status.ok()) throw StoreStatusError(std::move(status));
}

std::vector<std::string> GlooStore::Prefixed(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(absl::StrCat(prefix_, key));
  return out;
}

}  // namespace gloo_internal
}  // namespace devmesh
