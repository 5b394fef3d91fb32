// devmesh/device_mesh/spare_registry.cc
#include "device_mesh/spare_registry.h"

#include <algorithm>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
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

std::string GroupRecordKey(int64_t epoch, int rank) {
  return FailureWatch::EpochKey(epoch, absl::StrCat("groups/", rank));
}
std::string GroupKeyPrefix(absl::string_view tag) {
  return absl::StrCat("devmesh/group/", tag);
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
  const std::string hosts = absl::StrJoin(d.hosts, ",");
  absl::StrAppend(&out, "\n", hosts.size(), ":", hosts);
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
  std::string hosts;
  if (!absl::ConsumePrefix(&rest, "\n") || !ConsumeSized(&rest, &hosts)) {
    return Bad(text);
  }
  if (!hosts.empty()) d.hosts = absl::StrSplit(hosts, ',');
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

std::string JobEpochKey() { return "devmesh/job/epoch"; }

absl::StatusOr<int64_t> ReadJobEpoch(Store& store) {
  DEVMESH_ASSIGN_OR_RETURN(auto v, store.GetIfSet(JobEpochKey()));
  int64_t epoch = 0;
  if (!v.has_value() || !absl::SimpleAtoi(*v, &epoch) || epoch < 0) return 0;
  return epoch;
}

namespace {

// The group tags the ranks recorded in `epoch`, added to `tags`. A record
// deleted between its Check and its Get (a retirement of `epoch` running
// beside this one) is read as missing after 2 s.
absl::Status AddRecordedGroups(Store& store, int64_t epoch, int world_size,
                               std::set<std::string>* tags,
                               std::set<int>* recorders = nullptr) {
  for (int r = 0; r < world_size; ++r) {
    const std::string key = GroupRecordKey(epoch, r);
    DEVMESH_ASSIGN_OR_RETURN(bool set, store.Check({key}));
    if (!set) continue;
    absl::StatusOr<std::string> v = store.Get(key, absl::Seconds(2));
    if (absl::IsDeadlineExceeded(v.status())) continue;
    if (!v.ok()) return v.status();
    if (recorders != nullptr) recorders->insert(r);
    for (absl::string_view tag : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
      tags->insert(std::string(tag));
    }
  }
  return absl::OkStatus();
}

// Whether a member of `epoch` has no record there although it arrived in
// the agreement that ended the epoch (a Shrink's, or its first Grow
// attempt's): a rank records its groups as it moves into an epoch, before
// any agreement of it, so its record's Set failed (MeshRuntime::RecordGroups
// is best effort) and the groups it holds are not known.
absl::StatusOr<bool> ARecordIsMissing(Store& store, int64_t epoch,
                                      int world_size,
                                      const std::set<int>& recorders) {
  for (int r = 0; r < world_size; ++r) {
    if (recorders.count(r)) continue;
    const std::string shrink =
        FailureWatch::EpochKey(epoch, absl::StrCat("arrive/", r));
    const std::string grow = GrowKey(epoch, 0, absl::StrCat("arrive/", r));
    DEVMESH_ASSIGN_OR_RETURN(bool in_shrink, store.Check({shrink}));
    if (in_shrink) return true;
    DEVMESH_ASSIGN_OR_RETURN(bool in_grow, store.Check({grow}));
    if (in_grow) return true;
  }
  return false;
}

}  // namespace

absl::Status DeleteEpochKeys(Store& store, int64_t epoch, int world_size) {
  auto del = [&](const std::string& key) -> absl::Status {
    return store.DeleteKey(key).status();
  };
  // The groups first: their records are read from this epoch's keys. A
  // group is still held when any later epoch up to the job's pointer
  // records it: a retirement of epoch + 1 running beside this one (another
  // raise's thread) may have deleted epoch + 1's records already, and then
  // the pointer is past epoch + 2, whose records are still there (a
  // retirement deletes only epochs up to the pointer - 2). A group held in
  // epoch + 1 alone is free by then: the job reached epoch + 3.
  std::set<std::string> held;
  DEVMESH_RETURN_IF_ERROR(AddRecordedGroups(store, epoch, world_size, &held));
  DEVMESH_ASSIGN_OR_RETURN(const int64_t top, ReadJobEpoch(store));
  std::set<std::string> still;
  std::set<int> next_recorders;
  for (int64_t later = epoch + 1; later <= std::max(top, epoch + 1);
       ++later) {
    DEVMESH_RETURN_IF_ERROR(AddRecordedGroups(
        store, later, world_size, &still,
        later == epoch + 1 ? &next_recorders : nullptr));
  }
  // Records are best effort: a member of epoch + 1 whose record is missing
  // may hold any group, so none is deleted (the safe side: keys kept). So
  // too when epoch + 1 has no record at all and is not retired (the pointer
  // below epoch + 3): none of its records could be written. (Retired,
  // its records and arrivals are gone, and the later epochs' records
  // stand for it, as above.)
  bool complete = !held.empty();
  if (complete && next_recorders.empty()) {
    complete = top >= epoch + 3;
  } else if (complete) {
    DEVMESH_ASSIGN_OR_RETURN(
        const bool missing,
        ARecordIsMissing(store, epoch + 1, world_size, next_recorders));
    complete = !missing;
  }
  for (const std::string& tag : held) {
    if (!complete) break;
    if (still.count(tag)) continue;
    absl::Status deleted =
        store.DeletePrefix(absl::StrCat(GroupKeyPrefix(tag), "/")).status();
    // A user's Store subclass without DeletePrefix (Store's default): the
    // groups' keys are kept, the rest of the epoch goes as usual.
    if (absl::IsUnimplemented(deleted)) break;
    DEVMESH_RETURN_IF_ERROR(deleted);
  }
  for (int r = 0; r < world_size; ++r) {
    DEVMESH_RETURN_IF_ERROR(del(GroupRecordKey(epoch, r)));
  }
  for (int r = 0; r < world_size; ++r) {
    DEVMESH_RETURN_IF_ERROR(
        del(FailureWatch::EpochKey(epoch, absl::StrCat("arrive/", r))));
  }
  // Only a registered spare answers a Grow's call (JoinAsSpare registers in
  // an epoch before it answers there): the registry names every "ready/<r>".
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> spares,
                           RegisteredSpares(store, epoch));
  for (int64_t n = 0;; ++n) {
    DEVMESH_ASSIGN_OR_RETURN(bool opened,
                             store.DeleteKey(GrowKey(epoch, n, "open")));
    DEVMESH_ASSIGN_OR_RETURN(bool decided,
                             store.DeleteKey(GrowKey(epoch, n, "decision")));
    if (!opened && !decided) break;
    for (int r = 0; r < world_size; ++r) {
      DEVMESH_RETURN_IF_ERROR(
          del(GrowKey(epoch, n, absl::StrCat("arrive/", r))));
    }
    for (int r : spares) {
      DEVMESH_RETURN_IF_ERROR(
          del(GrowKey(epoch, n, absl::StrCat("ready/", r))));
    }
  }
  // The registry last: it names the "ready" keys above.
  DEVMESH_ASSIGN_OR_RETURN(int64_t slots, store.Add(SpareCountKey(epoch), 0));
  for (int64_t i = 0; i < slots; ++i) {
    DEVMESH_RETURN_IF_ERROR(del(SpareSlotKey(epoch, i)));
  }
  return del(SpareCountKey(epoch));
}

absl::StatusOr<EpochRange> RaiseJobEpoch(Store& store, int64_t epoch) {
  for (;;) {
    DEVMESH_ASSIGN_OR_RETURN(auto v, store.GetIfSet(JobEpochKey()));
    int64_t at = 0;
    if (v.has_value() && (!absl::SimpleAtoi(*v, &at) || at < 0)) {
      return absl::InternalError(absl::StrCat(
          "the store's ", JobEpochKey(), " holds '", v->substr(0, 40),
          "', not an epoch"));
    }
    if (v.has_value() && at >= epoch) return EpochRange{};  // raised past
    const std::string desired = absl::StrCat(epoch);
    DEVMESH_ASSIGN_OR_RETURN(
        std::string now,
        store.CompareSet(JobEpochKey(), v.value_or(""), desired));
    // Lost to another raiser: read again (the pointer only rises, so this
    // ends once it is at or past `epoch`).
    if (now != desired) continue;
    // The one who raised it to `at` deleted up to at - 2.
    return EpochRange{v.has_value() ? at - 1 : 0, epoch - 2};
  }
}

void RetireEpochs(std::shared_ptr<Store> store, int64_t epoch,
                  int world_size) {
  if (store == nullptr) return;
  absl::StatusOr<EpochRange> range = RaiseJobEpoch(*store, epoch);
  if (!range.ok() || range->first > range->last) return;
  auto retire = [store, range = *range, world_size] {
    for (int64_t x = range.first; x <= range.last; ++x) {
      if (!DeleteEpochKeys(*store, x, world_size).ok()) return;
    }
  };
  try {
    std::thread(retire).detach();
  } catch (const std::system_error&) {
    retire();  // no thread to be had: here, then
  }
}

namespace {

// The value of `key` when it is set, nullopt when it is not. A key deleted
// between GetIfSet's Check and its Get (RetireEpochs, under a reader that
// fell two epochs behind) would be waited for up to the store's default
// timeout: read as `*deleted` after 2 s instead.
absl::StatusOr<std::optional<std::string>> ReadDecision(Store& store,
                                                        const std::string& key,
                                                        bool* deleted) {
  DEVMESH_ASSIGN_OR_RETURN(bool set, store.Check({key}));
  if (!set) return std::optional<std::string>();
  auto v = store.Get(key, absl::Seconds(2));
  if (absl::IsDeadlineExceeded(v.status())) {
    *deleted = true;
    return std::optional<std::string>();
  }
  DEVMESH_RETURN_IF_ERROR(v.status());
  return std::optional<std::string>(*std::move(v));
}

}  // namespace

absl::StatusOr<JobPosition> FindJobPosition(Store& store) {
  JobPosition at;
  bool stale = false;
  auto read = [&](const std::string& key) {
    return ReadDecision(store, key, &stale);
  };
  DEVMESH_ASSIGN_OR_RETURN(at.epoch, ReadJobEpoch(store));
  for (;;) {
    if (stale) {
      // The job moved at least two epochs on while this scan read, and
      // epochs it was reading were retired: start again from the pointer.
      stale = false;
      DEVMESH_ASSIGN_OR_RETURN(at.epoch, ReadJobEpoch(store));
    }
    DEVMESH_ASSIGN_OR_RETURN(
        auto shrink, read(FailureWatch::EpochKey(at.epoch, "decision")));
    if (shrink.has_value() && IsShrinkSuccess(*shrink)) {
      at = JobPosition{at.epoch + 1, 0};
      continue;
    }
    bool moved = false;
    for (at.attempt = 0;; ++at.attempt) {
      DEVMESH_ASSIGN_OR_RETURN(
          auto grow, read(GrowKey(at.epoch, at.attempt, "decision")));
      if (stale || !grow.has_value()) break;
      if (absl::StartsWith(*grow, "grown;")) {
        moved = true;
        break;
      }
    }
    if (stale) continue;
    if (moved) {
      at = JobPosition{at.epoch + 1, 0};
      continue;
    }
    // A decision found missing may have been deleted (its epoch retired
    // after this scan passed the pointer): the job is then at or past the
    // pointer, which retirement raised first.
    DEVMESH_ASSIGN_OR_RETURN(const int64_t pointer, ReadJobEpoch(store));
    if (pointer <= at.epoch) return at;
    stale = true;
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
