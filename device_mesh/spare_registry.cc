// devmesh/device_mesh/spare_registry.cc
#include "device_mesh/spare_registry.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/error_info.h"
#include "device_mesh/failure_watch.h"
#include "status/status_macros.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

absl::Status Bad(absl::string_view text) {
  return absl::InternalError(absl::StrCat(
      "a Grow decision in the store cannot be parsed: '",
      text.substr(0, 200), "'"));
}

bool ParseRanks(absl::string_view text, std::vector<int>* out) {
  out->clear();
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int r = 0;
    if (!absl::SimpleAtoi(part, &r)) return false;
    out->push_back(r);
  }
  return true;
}

// "<bytes>:<value>" at the front of `text`, consumed.
bool ConsumeSized(absl::string_view* text, std::string* value) {
  const size_t colon = text->find(':');
  size_t n = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(text->substr(0, colon), &n) ||
      n > text->size() - colon - 1) {
    return false;
  }
  *value = std::string(text->substr(colon + 1, n));
  text->remove_prefix(colon + 1 + n);
  return true;
}

}  // namespace

std::string SpareCountKey(int64_t epoch) {
  return FailureWatch::EpochKey(epoch, "spares");
}
std::string SpareSlotKey(int64_t epoch, int64_t slot) {
  return FailureWatch::EpochKey(epoch, absl::StrCat("spare/", slot));
}
std::string GrowKey(int64_t epoch, int64_t attempt, absl::string_view what) {
  return FailureWatch::EpochKey(epoch, absl::StrCat("grow/", attempt, "/", what));
}

std::string EncodeGrowDecision(const GrowDecision& d) {
  switch (d.kind) {
    case GrowDecision::Kind::kError:
      return absl::StrCat("error=", static_cast<int>(d.error.code()), ";",
                          GetErrorInfo(d.error).disagreeing, ";",
                          d.error.message());
    case GrowDecision::Kind::kUnchanged:
      return absl::StrCat("unchanged;waiting=", absl::StrJoin(d.waiting, ","));
    case GrowDecision::Kind::kGrown:
      break;
  }
  std::string out = absl::StrCat(
      "grown;admitted=", absl::StrJoin(d.admitted, ","),
      ";waiting=", absl::StrJoin(d.waiting, ","), ";root=", d.root_index,
      ";dim=", d.replica_dim, "\n", d.mesh.size(), ":", d.mesh);
  for (const auto& [rank, ask] : d.asks) {
    absl::StrAppend(&out, "\n", rank, ":", ask.size(), ":", ask);
  }
  return out;
}

absl::StatusOr<GrowDecision> DecodeGrowDecision(absl::string_view text) {
  GrowDecision d;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "error=")) {
    std::vector<absl::string_view> parts =
        absl::StrSplit(rest, absl::MaxSplits(';', 2));
    int code = 0;
    int disagreeing = -1;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &code) ||
        !absl::SimpleAtoi(parts[1], &disagreeing) || code <= 0 || code > 16) {
      return Bad(text);
    }
    d.kind = GrowDecision::Kind::kError;
    d.error = absl::Status(static_cast<absl::StatusCode>(code), parts[2]);
    if (disagreeing >= 0) d.error = WithDisagreement(d.error, disagreeing);
    return d;
  }
  if (absl::ConsumePrefix(&rest, "unchanged;waiting=")) {
    d.kind = GrowDecision::Kind::kUnchanged;
    if (!ParseRanks(rest, &d.waiting)) return Bad(text);
    return d;
  }
  if (!absl::ConsumePrefix(&rest, "grown;")) return Bad(text);
  d.kind = GrowDecision::Kind::kGrown;
  const size_t eol = rest.find('\n');
  if (eol == absl::string_view::npos) return Bad(text);
  std::vector<absl::string_view> fields =
      absl::StrSplit(rest.substr(0, eol), ';');
  rest.remove_prefix(eol + 1);
  if (fields.size() != 4 || !absl::ConsumePrefix(&fields[0], "admitted=") ||
      !absl::ConsumePrefix(&fields[1], "waiting=") ||
      !absl::ConsumePrefix(&fields[2], "root=") ||
      !absl::ConsumePrefix(&fields[3], "dim=") ||
      !ParseRanks(fields[0], &d.admitted) ||
      !ParseRanks(fields[1], &d.waiting) ||
      !absl::SimpleAtoi(fields[2], &d.root_index) ||
      !absl::SimpleAtoi(fields[3], &d.replica_dim) ||
      !ConsumeSized(&rest, &d.mesh)) {
    return Bad(text);
  }
  while (!rest.empty()) {
    int rank = 0;
    std::string ask;
    if (!absl::ConsumePrefix(&rest, "\n")) return Bad(text);
    const size_t colon = rest.find(':');
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(rest.substr(0, colon), &rank)) {
      return Bad(text);
    }
    rest.remove_prefix(colon + 1);
    if (!ConsumeSized(&rest, &ask)) return Bad(text);
    d.asks[rank] = std::move(ask);
  }
  return d;
}

bool IsShrinkSuccess(absl::string_view text) {
  return absl::StartsWith(text, "survivors=");
}

absl::StatusOr<JobPosition> FindJobPosition(Store& store) {
  JobPosition at;
  for (;;) {
    DEVMESH_ASSIGN_OR_RETURN(
        auto shrink, store.GetIfSet(FailureWatch::EpochKey(at.epoch, "decision")));
    if (shrink.has_value() && IsShrinkSuccess(*shrink)) {
      at = JobPosition{at.epoch + 1, 0};
      continue;
    }
    bool moved = false;
    for (at.attempt = 0;; ++at.attempt) {
      DEVMESH_ASSIGN_OR_RETURN(
          auto grow, store.GetIfSet(GrowKey(at.epoch, at.attempt, "decision")));
      if (!grow.has_value()) break;
      if (absl::StartsWith(*grow, "grown;")) {
        moved = true;
        break;
      }
    }
    if (!moved) return at;
    at = JobPosition{at.epoch + 1, 0};
  }
}

absl::Status RegisterSpare(Store& store, int64_t epoch, int rank) {
  DEVMESH_ASSIGN_OR_RETURN(int64_t n, store.Add(SpareCountKey(epoch), 1));
  return store.Set(SpareSlotKey(epoch, n - 1), absl::StrCat(rank));
}

absl::StatusOr<std::vector<int>> RegisteredSpares(Store& store, int64_t epoch) {
  DEVMESH_ASSIGN_OR_RETURN(int64_t n, store.Add(SpareCountKey(epoch), 0));
  std::set<int> ranks;
  for (int64_t i = 0; i < n; ++i) {
    DEVMESH_ASSIGN_OR_RETURN(auto v, store.GetIfSet(SpareSlotKey(epoch, i)));
    int r = -1;
    if (v.has_value() && absl::SimpleAtoi(*v, &r) && r >= 0) ranks.insert(r);
  }
  return std::vector<int>(ranks.begin(), ranks.end());
}

}  // namespace device_mesh_internal
}  // namespace devmesh
