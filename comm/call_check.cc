// devmesh/comm/call_check.cc
#include "comm/call_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace devmesh {

bool SameCall(const CallRecord& a, const CallRecord& b) {
  return a.seq == b.seq && a.kind == b.kind && a.dtype == b.dtype &&
         a.op == b.op && a.root == b.root && a.count == b.count;
}

std::string DescribeCall(const CallRecord& call) {
  if (call.seq == 0) return "no collective yet";
  const absl::string_view kind = CallKindName(call.kind);
  if (call.kind == CallKind::kBarrier) return std::string(kind);
  if (call.kind == CallKind::kAllToAllV) {
    return absl::StrCat(kind, " ", DataTypeName(call.dtype));
  }
  std::string out = absl::StrCat(kind, " ", DataTypeName(call.dtype), " x ",
                                 call.count);
  switch (call.kind) {
    case CallKind::kAllReduce:
    case CallKind::kReduceScatter:
      absl::StrAppend(&out, " ", ReduceOpName(call.op));
      break;
    case CallKind::kReduce:
      absl::StrAppend(&out, " ", ReduceOpName(call.op), " to root ",
                      call.root);
      break;
    case CallKind::kGather:
      absl::StrAppend(&out, " to root ", call.root);
      break;
    case CallKind::kBroadcast:
    case CallKind::kScatter:
      absl::StrAppend(&out, " from root ", call.root);
      break;
    default:
      break;
  }
  return out;
}

absl::Status CallMismatchError(absl::string_view backend, int first_rank,
                               const CallRecord& first, int other_rank,
                               const CallRecord& other,
                               const std::vector<int>& group,
                               absl::string_view label) {
  const std::string along =
      label.empty() ? std::string() : absl::StrCat(" along ", label);
  const std::string tail =
      absl::StrCat(" (group of global ranks [", absl::StrJoin(group, ", "),
                   "]); the group refuses every later call");
  std::string message;
  if (first.seq == other.seq) {
    message =
        absl::StrCat(backend, " call #", first.seq, along,
                     ": the members' calls differ: global rank ", other_rank,
                     " called ", DescribeCall(other), ", global rank ",
                     first_rank, " ", DescribeCall(first), tail);
  } else {
    message = absl::StrCat(
        backend, along,
        ": the members are at different collectives: global rank ", other_rank,
        " at its #", other.seq, " (", DescribeCall(other), "), global rank ",
        first_rank, " at its #", first.seq, " (", DescribeCall(first),
        "): a member skipped or added a collective (one the front rejected "
        "on it still counts)",
        tail);
  }
  return WithDisagreement(absl::InvalidArgumentError(message), other_rank);
}

CallRecordWire ToCallRecordWire(const CallRecord& c) {
  return CallRecordWire{c.seq,
                        static_cast<int64_t>(c.kind),
                        static_cast<int64_t>(c.dtype),
                        static_cast<int64_t>(c.op),
                        c.root,
                        c.count};
}

CallRecord FromCallRecordWire(const CallRecordWire& w) {
  CallRecord c;
  c.seq = w.seq;
  c.kind = static_cast<CallKind>(w.kind);
  c.dtype = static_cast<DataType>(w.dtype);
  c.op = static_cast<ReduceOp>(w.op);
  c.root = static_cast<int>(w.root);
  c.count = w.count;
  return c;
}

absl::Status CompareCallRecords(absl::string_view backend,
                                absl::Span<const CallRecordWire> all,
                                const std::vector<int>& group,
                                absl::string_view label) {
  if (all.empty()) return absl::OkStatus();
  auto global = [&group](size_t j) {
    return j < group.size() ? group[j] : static_cast<int>(j);
  };
  const CallRecord first = FromCallRecordWire(all[0]);
  for (size_t j = 1; j < all.size(); ++j) {
    const CallRecord other = FromCallRecordWire(all[j]);
    if (SameCall(first, other)) continue;
    return CallMismatchError(backend, global(0), first, global(j), other,
                             group, label);
  }
  return absl::OkStatus();
}

}  // namespace devmesh
