// devmesh/device_mesh/mesh_agreement.cc
#include "device_mesh/mesh_agreement.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/communicator.h"
#include "config/settings.h"
#include "config/version.h"
#include "status/status_macros.h"
#include "store/store.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

constexpr absl::string_view kOk = "ok";

std::string Parenthesized(const std::vector<std::string>& items) {
  return absl::StrCat("(", absl::StrJoin(items, ", "), ")");
}

// rank 0's "spec" when it could not make its mesh: the others then read the
// verdict it wrote first.
constexpr absl::string_view kAbandonedSpec = "abandoned";

// Why a verdict is not kOk, and so which payload its error carries.
enum class Failure : char {
  kDisagreed = 'd',  // a rank asked for another mesh: kDisagreementPayload
  kAbandoned = 'a',  // a rank could not make its mesh: kPeerPayload
  kOther = 'o',      // a timeout, a malformed spec: none
};

// A verdict other than kOk:
// "<failure>\n<global rank>\n<status code>\n<message>".
std::string FailureVerdict(Failure failure, int rank,
                           const absl::Status& error) {
  return absl::StrCat(std::string(1, static_cast<char>(failure)), "\n", rank,
                      "\n", static_cast<int>(error.code()), "\n",
                      error.message());
}

absl::Status FromVerdict(absl::string_view verdict) {
  if (verdict == kOk) return absl::OkStatus();
  std::vector<absl::string_view> parts =
      absl::StrSplit(verdict, absl::MaxSplits('\n', 3));
  int rank = -1, code = 0;
  if (parts.size() != 4 || parts[0].size() != 1 ||
      !absl::SimpleAtoi(parts[1], &rank) ||
      !absl::SimpleAtoi(parts[2], &code) || code <= 0 ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrCat(
        "the mesh agreement's verdict is malformed: \"",
        verdict, "\""));
  }
  absl::Status error(static_cast<absl::StatusCode>(code), parts[3]);
  switch (static_cast<Failure>(parts[0][0])) {
    case Failure::kDisagreed:
      return WithDisagreement(std::move(error), rank);
    case Failure::kAbandoned:
      return WithPeer(std::move(error), rank);
    default:
      return error;
  }
}

std::string Key(int64_t index, absl::string_view name) {
  return absl::StrCat("mesh_agreement/", index, "/", name);
}

// One agreement: where its keys are, who takes part (sorted global ranks;
// the first one publishes its spec), what the errors call the operation.
struct Round {
  std::string prefix;
  std::vector<int> members;
  std::string what;
  bool whole_world = true;  // "every rank" (else "every rank of the mesh")
};

absl::Status Agree(MeshRuntime& runtime, const Round& round,
                   const MeshSpec& spec, absl::Duration timeout);

}  // namespace

MeshSpec InitDeviceMeshSpec(absl::string_view device_type,
                            absl::Span<const int64_t> shape,
                            const std::vector<std::string>& names,
                            const MeshOptions& options) {
  MeshSpec spec;
  spec.emplace_back("devmesh version", kDevmeshVersion);
  spec.emplace_back("device type", std::string(device_type));
  std::vector<std::string> sizes;
  for (int64_t s : shape) sizes.push_back(absl::StrCat(s));
  spec.emplace_back("mesh shape", Parenthesized(sizes));
  spec.emplace_back("mesh dim names", Parenthesized(names));
  for (size_t d = 0; d < shape.size(); ++d) {
    const std::string group_name =
        d < names.size() ? names[d] : absl::StrCat("dim_", d);
    spec.emplace_back(absl::StrCat("options of mesh dim ", d),
                      GroupOptionsString(options.For(group_name)));
  }
  spec.emplace_back("require_inside_host",
                    Parenthesized(options.require_inside_host));
  for (const auto& [name, value] : AgreedSettingsText(ProcessSettings())) {
    spec.emplace_back(absl::StrCat("setting ", name), value);
  }
  return spec;
}

MeshSpec RootMeshSpec(absl::string_view device_type, const MeshLayout& layout,
                      const MeshOptions& options) {
  std::vector<std::string> names = layout.dim_names();
  MeshSpec spec =
      InitDeviceMeshSpec(device_type, layout.shape(), names, options);
  // The ranks in row-major order after the shape: a table of the same shape
  // with other partners sums with the wrong ones.
  auto table = [](const std::vector<int64_t>& ranks) {
    if (ranks.size() <= 64) {
      std::vector<std::string> items;
      for (int64_t r : ranks) items.push_back(absl::StrCat(r));
      return Parenthesized(items);
    }
    uint64_t h = 14695981039346656037ull;  // FNV-1a, the same on every rank
    for (int64_t r : ranks) {
      for (int b = 0; b < 8; ++b) {
        h ^= static_cast<uint64_t>(r >> (8 * b)) & 0xff;
        h *= 1099511628211ull;
      }
    }
    return absl::StrCat(ranks.size(), " ranks, FNV-1a ", absl::Hex(h));
  };
  auto at = std::find_if(spec.begin(), spec.end(), [](const auto& field) {
    return field.first == "mesh shape";
  });
  if (at != spec.end()) ++at;
  at = spec.insert(at, {"mesh ranks (row-major)", table(layout.RankTable())});
  if (!layout.IsRoot()) {
    // A slice, flatten, ... of a root: the root too.
    const MeshLayout root = layout.RootLayout();
    std::vector<std::string> sizes;
    for (int64_t n : root.shape()) sizes.push_back(absl::StrCat(n));
    spec.insert(at + 1, {"root mesh", absl::StrCat(Parenthesized(sizes), " ",
                                                   table(root.RankTable()))});
  }
  return spec;
}

std::string EncodeMeshSpec(const MeshSpec& spec) {
  std::string out;
  for (const auto& [field, value] : spec) {
    absl::StrAppend(&out, field.size(), ":", field, value.size(), ":", value);
  }
  return out;
}

absl::StatusOr<MeshSpec> DecodeMeshSpec(absl::string_view text) {
  MeshSpec spec;
  auto next = [&text](std::string* out) {
    const size_t colon = text.find(':');
    size_t n = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(text.substr(0, colon), &n) ||
        n > text.size() - colon - 1) {
      return false;
    }
    *out = std::string(text.substr(colon + 1, n));
    text.remove_prefix(colon + 1 + n);
    return true;
  };
  while (!text.empty()) {
    std::string field, value;
    if (!next(&field) || !next(&value)) {
      return absl::InvalidArgumentError(
          "the mesh spec read from the store is malformed");
    }
    spec.emplace_back(std::move(field), std::move(value));
  }
  return spec;
}

absl::Status CompareMeshSpecs(int me, const MeshSpec& mine, int them,
                              const MeshSpec& theirs) {
  return CompareMeshSpecs(me, mine, them, theirs, "InitDeviceMesh",
                          "every rank");
}

absl::Status CompareMeshSpecs(int me, const MeshSpec& mine, int them,
                              const MeshSpec& theirs, absl::string_view what,
                              absl::string_view who) {
  auto differ = [&](const std::string& field, const std::string& a,
                    const std::string& b) {
    return WithDisagreement(
        absl::InvalidArgumentError(absl::StrCat(
            what, ": the ranks disagree on the mesh: global rank ", me,
            " asked for ", field, " ", a, ", global rank ", them, " for ", b,
            "; ", who, " fails with this error")),
        me);
  };
  const size_t n = std::min(mine.size(), theirs.size());
  for (size_t i = 0; i < n; ++i) {
    if (mine[i].first != theirs[i].first) {
      return differ("the field", mine[i].first, theirs[i].first);
    }
    if (mine[i].second != theirs[i].second) {
      return differ(mine[i].first, mine[i].second, theirs[i].second);
    }
  }
  if (mine.size() != theirs.size()) {
    return differ("a spec of fields", absl::StrCat(mine.size()),
                  absl::StrCat(theirs.size()));
  }
  return absl::OkStatus();
}

absl::Status AgreeOnMesh(MeshRuntime& runtime, int64_t index,
                         const MeshSpec& spec, absl::Duration timeout) {
  const int world = runtime.world_size();
  if (world <= 1 || runtime.detached() || !runtime.agrees_on_meshes()) {
    return absl::OkStatus();
  }
  Round round;
  round.prefix = Key(index, "");
  round.members.resize(world);
  for (int r = 0; r < world; ++r) round.members[r] = r;
  round.what = "InitDeviceMesh";
  return Agree(runtime, round, spec, timeout);
}

absl::Status AgreeOnRoot(MeshRuntime& runtime, int64_t root_index,
                         std::vector<int> members, const MeshSpec& spec,
                         absl::string_view what, absl::Duration timeout) {
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  if (members.size() <= 1 || runtime.detached() ||
      !runtime.agrees_on_meshes() ||
      !std::binary_search(members.begin(), members.end(), runtime.rank())) {
    return absl::OkStatus();
  }
  Round round;
  round.prefix = absl::StrCat("root_agreement/", root_index, "/");
  round.members = std::move(members);
  round.what = std::string(what);
  round.whole_world = false;
  return Agree(runtime, round, spec, timeout);
}

namespace {

absl::Status Agree(MeshRuntime& runtime, const Round& round,
                   const MeshSpec& spec, absl::Duration timeout) {
  const int me = runtime.rank();
  const int world = static_cast<int>(round.members.size());
  const int leader = round.members.front();
  const bool whole_world = round.whole_world;
  auto key = [&](absl::string_view name) {
    return absl::StrCat(round.prefix, name);
  };
  std::shared_ptr<Store> store = runtime.CreationStore();
  const std::string verdict_key = key("verdict");
  const absl::Time deadline = absl::Now() + timeout;
  auto remaining = [&] {
    return std::max(absl::ZeroDuration(), deadline - absl::Now());
  };
  // Ends the agreement with `error` unless a verdict stands already; either
  // way, every rank's answer is the verdict that stands.
  auto conclude = [&](Failure failure, const absl::Status& error) {
    DEVMESH_ASSIGN_OR_RETURN(
        auto first,
        store->CompareSet(verdict_key, "", FailureVerdict(failure, me, error)));
    return FromVerdict(first);
  };
  // Each member other than the leader marks its own key, "agreed/<rank>",
  // once it has compared the spec, whatever it found (a member that
  // disagrees, or cannot read the spec, writes its failure verdict first);
  // the leader waits for every mark, in one Wait, then writes the verdict
  // (kOk, unless a failure stands). No counter that every member adds to:
  // on etcd an Add is a compare-and-swap txn, and 511 members adding to one
  // key at once kept a 512-rank job in its agreement past 120 s
  // (tools/scale_check.sh --hosts=8 --mesh=32x16 --store=etcd).
  std::vector<std::string> marks;
  for (int member : round.members) {
    if (member != leader) marks.push_back(key(absl::StrCat("agreed/", member)));
  }
  const std::string my_mark = key(absl::StrCat("agreed/", me));
  // A wait that ran out ends the agreement for every rank, the late ones
  // included (one that came after would otherwise agree alone).
  auto timed_out = [&](const absl::Status& s) -> absl::Status {
    if (!absl::IsDeadlineExceeded(s)) return s;
    // The marks there (the message's count only: one Check per 128 marks,
    // then each missing one's, on the failure path alone).
    int64_t agreed = 0;
    for (size_t begin = 0; begin < marks.size(); begin += 128) {
      const size_t end = std::min(marks.size(), begin + 128);
      std::vector<std::string> chunk(marks.begin() + begin,
                                     marks.begin() + end);
      auto all = store->Check(chunk);
      if (all.ok() && *all) {
        agreed += static_cast<int64_t>(chunk.size());
        continue;
      }
      for (const std::string& m : chunk) {
        auto one = store->Check({m});
        if (one.ok() && *one) ++agreed;
      }
    }
    auto has_spec = store->Check({key("spec")});
    const bool spec = has_spec.ok() && *has_spec;
    const int64_t reached = agreed + (spec ? 1 : 0);
    return conclude(
        Failure::kOther,
        absl::DeadlineExceededError(absl::StrCat(
            round.what, ": ", reached, " of ", world,
            whole_world ? " ranks" : " ranks of the mesh",
            " reached the mesh agreement within ",
            absl::FormatDuration(timeout), " (global rank ", leader, " ",
            spec ? "had" : "had not", "); the others did not call ",
            round.what)));
  };
  if (me == leader) {
    DEVMESH_RETURN_IF_ERROR(store->Set(key("spec"), EncodeMeshSpec(spec)));
    absl::Status all = store->Wait(marks, remaining());
    if (!all.ok()) return timed_out(all);
    DEVMESH_ASSIGN_OR_RETURN(
        auto first, store->CompareSet(verdict_key, "", std::string(kOk)));
    return FromVerdict(first);
  }
  auto theirs = store->Get(key("spec"), remaining());
  if (!theirs.ok()) return timed_out(theirs.status());
  if (*theirs != kAbandonedSpec) {
    // A failure verdict first, then the mark: the leader's wait ends, and
    // its CompareSet of kOk reads the failure back.
    auto fail = [&](Failure failure, const absl::Status& error) {
      absl::Status verdict = conclude(failure, error);
      (void)store->Set(my_mark, "");
      return verdict;
    };
    auto decoded = DecodeMeshSpec(*theirs);
    if (!decoded.ok()) return fail(Failure::kOther, decoded.status());
    if (absl::Status differ =
            CompareMeshSpecs(me, spec, leader, *decoded, round.what,
                             whole_world ? "every rank"
                                         : "every rank of the mesh");
        !differ.ok()) {
      return fail(Failure::kDisagreed, differ);
    }
    DEVMESH_RETURN_IF_ERROR(store->Set(my_mark, ""));
  }
  auto verdict = store->Get(verdict_key, remaining());
  if (!verdict.ok()) return timed_out(verdict.status());
  return FromVerdict(*verdict);
}

}  // namespace

absl::Status AbandonRoot(MeshRuntime& runtime, int64_t root_index,
                         bool leader, absl::string_view what,
                         absl::Status error) {
  if (runtime.world_size() <= 1 || runtime.detached() ||
      !runtime.agrees_on_meshes()) {
    return error;
  }
  const absl::Status told(
      error.code(),
      absl::StrCat(what, ": global rank ", runtime.rank(),
                   " could not make its mesh: ", error.message()));
  std::shared_ptr<Store> store = runtime.CreationStore();
  const std::string prefix = absl::StrCat("root_agreement/", root_index, "/");
  (void)store->CompareSet(
      absl::StrCat(prefix, "verdict"), "",
      FailureVerdict(Failure::kAbandoned, runtime.rank(), told));
  if (leader) {
    (void)store->Set(absl::StrCat(prefix, "spec"), std::string(kAbandonedSpec));
  } else {
    // The leader waits for every member's mark: this one's, after its
    // verdict.
    (void)store->Set(absl::StrCat(prefix, "agreed/", runtime.rank()), "");
  }
  return error;
}

absl::Status AbandonMesh(MeshRuntime& runtime, int64_t index,
                         absl::Status error) {
  if (runtime.world_size() <= 1 || runtime.detached() ||
      !runtime.agrees_on_meshes()) {
    return error;
  }
  const absl::Status told(
      error.code(),
      absl::StrCat("InitDeviceMesh: global rank ", runtime.rank(),
                   " could not make its mesh: ", error.message()));
  std::shared_ptr<Store> store = runtime.CreationStore();
  (void)store->CompareSet(
      Key(index, "verdict"), "",
      FailureVerdict(Failure::kAbandoned, runtime.rank(), told));
  // Rank 0's spec is what the others wait for first: a marker sends them
  // to the verdict.
  if (runtime.rank() == 0) {
    (void)store->Set(Key(index, "spec"), std::string(kAbandonedSpec));
  } else {
    // Rank 0 waits for every other rank's mark: this one's, after its
    // verdict.
    (void)store->Set(Key(index, absl::StrCat("agreed/", runtime.rank())), "");
  }
  return error;
}

}  // namespace device_mesh_internal
}  // namespace devmesh
