#include "store/prefix_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace devmesh {

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {}

std::string PrefixStore::Key(absl::string_view key) const {
  return absl::StrCat(prefix_, "/", key);
}

std::vector<std::string> PrefixStore::Keys(
    absl::Span<const std::string> keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(Key(key));
  return out;
}

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(Key(key), value);
}

absl::StatusOr<std::string> PrefixStore::Get(absl::string_view key,
                                             absl::Duration timeout) {
  return base_->Get(Key(key), timeout);
}

absl::StatusOr<int64_t> PrefixStore::Add(absl::string_view key,
                                         int64_t delta) {
  return base_->Add(Key(key), delta);
}

absl::StatusOr<std::string> PrefixStore::CompareSet(
    absl::string_view key, absl::string_view expected,
    absl::string_view desired) {
  return base_->CompareSet(Key(key), expected, desired);
}

absl::Status PrefixStore::Wait(absl::Span<const std::string> keys,
                               absl::Duration timeout) {
  return base_->Wait(Keys(keys), timeout);
}

absl::StatusOr<bool> PrefixStore::Check(absl::Span<const std::string> keys) {
  return base_->Check(Keys(keys));
}

absl::StatusOr<bool> PrefixStore::DeleteKey(absl::string_view key) {
  return base_->DeleteKey(Key(key));
}

absl::StatusOr<int64_t> PrefixStore::DeletePrefix(absl::string_view prefix) {
  return base_->DeletePrefix(Key(prefix));
}

absl::StatusOr<int64_t> PrefixStore::NumKeys() { return base_->NumKeys(); }

absl::StatusOr<std::vector<std::string>> PrefixStore::MultiGet(
    absl::Span<const std::string> keys, absl::Duration timeout) {
  return base_->MultiGet(Keys(keys), timeout);
}

absl::Status PrefixStore::MultiSet(absl::Span<const std::string> keys,
                                   absl::Span<const std::string> values) {
  return base_->MultiSet(Keys(keys), values);
}

}  // namespace devmesh
