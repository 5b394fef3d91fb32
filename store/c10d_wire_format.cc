#include "store/c10d_wire_format.h"

#include "absl/base/internal/endian.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "store/store_limits.h"
#include "store/wire_format.h"

namespace devmesh {
namespace {

bool HasOneKey(C10dQuery q) {
  return q == C10dQuery::kSet || q == C10dQuery::kCompareSet ||
         q == C10dQuery::kGet || q == C10dQuery::kAdd ||
         q == C10dQuery::kDeleteKey || q == C10dQuery::kAppend ||
         q == C10dQuery::kQueuePush || q == C10dQuery::kQueuePop ||
         q == C10dQuery::kQueueLen || q == C10dQuery::kBarrier;
}
// ADD and BARRIER end with an i64 after their key.
bool HasNumberAfterKey(C10dQuery q) {
  return q == C10dQuery::kAdd || q == C10dQuery::kBarrier;
}
bool HasKeyList(C10dQuery q) {
  return q == C10dQuery::kCheck || q == C10dQuery::kWait ||
         q == C10dQuery::kMultiGet || q == C10dQuery::kMultiSet;
}
size_t ValuesAfterKey(C10dQuery q) {
  if (q == C10dQuery::kSet || q == C10dQuery::kAppend ||
      q == C10dQuery::kQueuePush) {
    return 1;
  }
  if (q == C10dQuery::kCompareSet) return 2;
  return 0;
}

// Bounds-checked reading from the start of a request. A read that does not
// fit sets need() to the input size that would let it succeed.
class Cursor {
 public:
  explicit Cursor(absl::string_view in) : in_(in) {}
  bool Fixed(size_t n, const char** p) {
    if (in_.size() - pos_ < n) {
      need_ = pos_ + n;
      return false;
    }
    *p = in_.data() + pos_;
    pos_ += n;
    return true;
  }
  bool U32(uint32_t* v) {
    const char* p;
    if (!Fixed(4, &p)) return false;
    *v = absl::little_endian::Load32(p);
    return true;
  }
  bool U64(uint64_t* v) {
    const char* p;
    if (!Fixed(8, &p)) return false;
    *v = absl::little_endian::Load64(p);
    return true;
  }
  // A string whose declared length must not exceed `limit` (else *too_long).
  bool Str(size_t limit, absl::string_view* v, bool* too_long) {
    const size_t start = pos_;
    uint64_t len = 0;
    if (!U64(&len)) return false;
    if (len > limit) {
      *too_long = true;
      return false;
    }
    const char* p;
    if (!Fixed(static_cast<size_t>(len), &p)) {
      pos_ = start;
      return false;
    }
    *v = absl::string_view(p, static_cast<size_t>(len));
    return true;
  }
  size_t pos() const { return pos_; }
  size_t need() const { return need_; }

 private:
  absl::string_view in_;
  size_t pos_ = 0;
  size_t need_ = 0;
};

absl::Status TooLong(C10dQuery q, absl::string_view field, size_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat("c10d query ", static_cast<int>(q), ": ", field,
                   " is longer than the limit of ", limit, " bytes"));
}

}  // namespace

void AppendC10dU8(std::string& out, uint8_t v) {
  out.push_back(static_cast<char>(v));
}
void AppendC10dU32(std::string& out, uint32_t v) {
  char b[4];
  absl::little_endian::Store32(b, v);
  out.append(b, 4);
}
void AppendC10dI64(std::string& out, int64_t v) {
  char b[8];
  absl::little_endian::Store64(b, static_cast<uint64_t>(v));
  out.append(b, 8);
}
void AppendC10dString(std::string& out, absl::string_view v) {
  AppendC10dI64(out, static_cast<int64_t>(v.size()));
  out.append(v.data(), v.size());
}

std::string EncodeC10dRequest(const C10dRequest& r) {
  size_t size = 1 + 8 + 8;
  for (absl::string_view k : r.keys) size += 8 + k.size();
  for (absl::string_view v : r.values) size += 8 + v.size();
  std::string out;
  out.reserve(size);
  AppendC10dU8(out, static_cast<uint8_t>(r.query));
  switch (r.query) {
    case C10dQuery::kValidate:
    case C10dQuery::kPing:
      AppendC10dU32(out, static_cast<uint32_t>(r.number));
      break;
    case C10dQuery::kMultiSet:
      AppendC10dI64(out, static_cast<int64_t>(r.keys.size()));
      for (size_t i = 0; i < r.keys.size(); ++i) {
        AppendC10dString(out, r.keys[i]);
        AppendC10dString(out, i < r.values.size() ? r.values[i] : "");
      }
      break;
    default:
      if (HasKeyList(r.query)) {
        AppendC10dI64(out, static_cast<int64_t>(r.keys.size()));
        for (absl::string_view k : r.keys) AppendC10dString(out, k);
      } else if (HasOneKey(r.query)) {
        AppendC10dString(out, r.keys.empty() ? "" : r.keys[0]);
        for (absl::string_view v : r.values) AppendC10dString(out, v);
        if (HasNumberAfterKey(r.query)) AppendC10dI64(out, r.number);
      }
      break;
  }
  return out;
}

bool IsC10dGreeting(absl::string_view first) {
  return first.size() >= kC10dGreetingBytes &&
         first[0] == static_cast<char>(C10dQuery::kValidate) &&
         absl::little_endian::Load32(first.data() + 1) == kC10dMagic;
}

bool CouldBeC10dGreeting(absl::string_view first) {
  std::string greeting;
  AppendC10dU8(greeting, static_cast<uint8_t>(C10dQuery::kValidate));
  AppendC10dU32(greeting, kC10dMagic);
  return first.size() <= greeting.size() &&
         absl::string_view(greeting).substr(0, first.size()) == first;
}

absl::StatusOr<C10dDecoded> DecodeC10dRequest(absl::string_view input,
                                              C10dScan* scan) {
  C10dDecoded out;
  if (input.empty()) {
    out.need_bytes = 1;
    return out;
  }
  const uint8_t type = static_cast<uint8_t>(input[0]);
  if (type > static_cast<uint8_t>(C10dQuery::kBarrier)) {
    return absl::InvalidArgumentError(
        absl::StrCat("c10d query type ", static_cast<int>(type),
                     " is unknown (torch 2.15's client sends 0 to 18)"));
  }
  C10dRequest r;
  r.query = static_cast<C10dQuery>(type);
  Cursor in(input.substr(1));
  bool too_long = false;
  auto need_more = [&]() -> absl::StatusOr<C10dDecoded> {
    out.need_bytes = 1 + in.need();
    if (out.need_bytes > size_t{kMaxFrameBytes}) {
      return TooLong(r.query, "the request", kMaxFrameBytes);
    }
    return out;
  };
  const size_t key_limit = kMaxKeyBytes + 1;
  if (r.query == C10dQuery::kValidate || r.query == C10dQuery::kPing) {
    uint32_t v = 0;
    if (!in.U32(&v)) return need_more();
    r.number = v;
  } else if (HasOneKey(r.query)) {
    absl::string_view key;
    if (!in.Str(key_limit, &key, &too_long)) {
      if (too_long) return TooLong(r.query, "the key", key_limit);
      return need_more();
    }
    r.keys.push_back(key);
    for (size_t i = 0; i < ValuesAfterKey(r.query); ++i) {
      absl::string_view v;
      if (!in.Str(kMaxValueBytes, &v, &too_long)) {
        if (too_long) return TooLong(r.query, "a value", kMaxValueBytes);
        return need_more();
      }
      r.values.push_back(v);
    }
    if (HasNumberAfterKey(r.query)) {
      uint64_t number = 0;
      if (!in.U64(&number)) return need_more();
      r.number = static_cast<int64_t>(number);
    }
  } else if (HasKeyList(r.query)) {
    uint64_t n = 0;
    if (!in.U64(&n)) return need_more();
    if (n > kMaxKeysPerCall) {
      return absl::InvalidArgumentError(
          absl::StrCat("c10d query ", type, " has ", n,
                       " keys; the limit is ", kMaxKeysPerCall));
    }
    const bool pairs = r.query == C10dQuery::kMultiSet;
    if (scan != nullptr) {
      // Walk the string lengths from where the last try stopped; build the
      // views below only once every string is present.
      const uint64_t total = pairs ? 2 * n : n;
      size_t pos = scan->pos > 0 ? scan->pos : 1 + 8;
      uint64_t done = scan->pos > 0 ? scan->strings : 0;
      while (done < total) {
        const bool is_value = pairs && done % 2 == 1;
        const size_t limit = is_value ? kMaxValueBytes : key_limit;
        size_t need = pos + 8;
        if (input.size() >= need) {
          const uint64_t len = absl::little_endian::Load64(input.data() + pos);
          if (len > limit) {
            return TooLong(r.query, is_value ? "a value" : "a key", limit);
          }
          need += static_cast<size_t>(len);
        }
        if (input.size() < need) {
          scan->pos = pos;
          scan->strings = done;
          out.need_bytes = need;
          if (out.need_bytes > size_t{kMaxFrameBytes}) {
            return TooLong(r.query, "the request", kMaxFrameBytes);
          }
          return out;
        }
        pos = need;
        ++done;
      }
    }
    // Reserve only what the bytes present can hold (8 bytes per string).
    const size_t room = (input.size() - 1) / (pairs ? 16 : 8);
    r.keys.reserve(std::min<size_t>(n, room));
    if (pairs) r.values.reserve(std::min<size_t>(n, room));
    for (uint64_t i = 0; i < n; ++i) {
      absl::string_view key;
      if (!in.Str(key_limit, &key, &too_long)) {
        if (too_long) return TooLong(r.query, "a key", key_limit);
        return need_more();
      }
      r.keys.push_back(key);
      if (!pairs) continue;
      absl::string_view v;
      if (!in.Str(kMaxValueBytes, &v, &too_long)) {
        if (too_long) return TooLong(r.query, "a value", kMaxValueBytes);
        return need_more();
      }
      r.values.push_back(v);
    }
  }
  // CANCEL_WAIT, GETNUMKEYS and LIST_KEYS have no fields.
  out.consumed = 1 + in.pos();
  if (out.consumed > size_t{kMaxFrameBytes}) {
    return TooLong(r.query, "the request", kMaxFrameBytes);
  }
  out.request = std::move(r);
  return out;
}

}  // namespace devmesh
