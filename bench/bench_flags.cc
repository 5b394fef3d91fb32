#include "bench/bench_flags.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace devmesh {

absl::StatusOr<std::vector<int64_t>> ParseMeshShape(absl::string_view text) {
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("x,"))) {
    int64_t size;
    if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh shape '", text,
          "' must be positive integers separated by 'x', e.g. 2x2"));
    }
    shape.push_back(size);
  }
  return shape;
}

std::vector<std::string> ParseDimNames(absl::string_view text) {
  if (text.empty()) return {};
  return absl::StrSplit(text, ',');
}

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  absl::string_view digits = text;
  int shift = 0;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(digits.back())) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: break;
    }
    if (shift != 0) digits.remove_suffix(1);
  }
  int64_t value;
  if (!absl::SimpleAtoi(digits, &value) || value < 0 ||
      value > (int64_t{1} << (62 - shift))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte size '", text, "' must be a non-negative integer with an "
        "optional K, M or G suffix, e.g. 64M"));
  }
  return value << shift;
}

absl::StatusOr<std::vector<int64_t>> ByteSweep(int64_t min_bytes,
                                               int64_t max_bytes) {
  if (min_bytes < 1 || min_bytes > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte sweep needs 1 <= min_bytes <= max_bytes, got ", min_bytes,
        " and ", max_bytes));
  }
  std::vector<int64_t> sizes;
  for (int64_t b = min_bytes; b <= max_bytes; b *= 2) {
    sizes.push_back(b);
    if (b > max_bytes / 2) break;
  }
  return sizes;
}

}  // namespace devmesh
