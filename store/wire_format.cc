#include "store/wire_format.h"

#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"
#include "store/store_limits.h"

namespace devmesh {
namespace {

bool HasKeyField(Op op) {
  return op == Op::kSet || op == Op::kGet || op == Op::kAdd ||
         op == Op::kCompareSet || op == Op::kDeleteKey || op == Op::kAppend ||
         op == Op::kQueuePush || op == Op::kQueuePop || op == Op::kQueueLen ||
         op == Op::kBarrier || op == Op::kDeletePrefix;
}
bool HasOneValue(Op op) {
  return op == Op::kSet || op == Op::kAppend || op == Op::kQueuePush;
}
bool HasNumber(Op op) {
  return op == Op::kGet || op == Op::kWait || op == Op::kMultiGet ||
         op == Op::kAdd || op == Op::kBarrier;
}
bool HasKeyList(Op op) {
  return op == Op::kWait || op == Op::kCheck || op == Op::kMultiGet ||
         op == Op::kMultiSet || op == Op::kMultiGetOrEmpty;
}
bool HasTimeout(Op op) {
  return op == Op::kGet || op == Op::kWait || op == Op::kMultiGet;
}

absl::Status Truncated(Op op, absl::string_view field) {
  return absl::InvalidArgumentError(
      absl::StrCat("request op ", static_cast<int>(op), ": field '", field,
                   "' is truncated"));
}

// The server takes the empty key too (c10d's set("") arrives as "/", which
// the c10d session strips to ""; torch's servers store it). devmesh's Store
// methods refuse "" before sending, so only the c10d side produces it.
absl::Status CheckKey(absl::string_view key) {
  return key.empty() ? absl::OkStatus() : ValidateKey(key);
}

}  // namespace

WireWriter& WireWriter::U8(uint8_t v) {
  out_.push_back(static_cast<char>(v));
  return *this;
}
WireWriter& WireWriter::U32(uint32_t v) {
  char b[4];
  absl::little_endian::Store32(b, v);
  out_.append(b, 4);
  return *this;
}
WireWriter& WireWriter::I64(int64_t v) {
  char b[8];
  absl::little_endian::Store64(b, static_cast<uint64_t>(v));
  out_.append(b, 8);
  return *this;
}
WireWriter& WireWriter::Bytes(absl::string_view v) {
  U32(static_cast<uint32_t>(v.size()));
  out_.append(v.data(), v.size());
  return *this;
}
std::string WireWriter::Finish() && {
  absl::little_endian::Store32(&out_[0],
                               static_cast<uint32_t>(out_.size() - 4));
  return std::move(out_);
}

bool WireReader::U8(uint8_t* v) {
  if (data_.size() < 1) return false;
  *v = static_cast<uint8_t>(data_[0]);
  data_.remove_prefix(1);
  return true;
}
bool WireReader::U32(uint32_t* v) {
  if (data_.size() < 4) return false;
  *v = absl::little_endian::Load32(data_.data());
  data_.remove_prefix(4);
  return true;
}
bool WireReader::I64(int64_t* v) {
  if (data_.size() < 8) return false;
  *v = static_cast<int64_t>(absl::little_endian::Load64(data_.data()));
  data_.remove_prefix(8);
  return true;
}
bool WireReader::Bytes(absl::string_view* v) {
  WireReader copy = *this;
  uint32_t n = 0;
  if (!copy.U32(&n) || copy.data_.size() < n) return false;
  *v = copy.data_.substr(0, n);
  copy.data_.remove_prefix(n);
  *this = copy;
  return true;
}

std::string EncodeRequest(const Request& r) {
  size_t size = 32;
  for (absl::string_view k : r.keys) size += 4 + k.size();
  for (absl::string_view v : r.values) size += 4 + v.size();
  WireWriter w(size);
  w.U8(static_cast<uint8_t>(r.op));
  if (r.op == Op::kHello) {
    w.U32(kWireMagic).U32(static_cast<uint32_t>(r.number));
    w.Bytes(r.values.empty() ? absl::string_view() : r.values[0]);
    return std::move(w).Finish();
  }
  if (HasKeyField(r.op)) w.Bytes(r.keys.empty() ? "" : r.keys[0]);
  if (HasKeyList(r.op)) {
    w.U32(static_cast<uint32_t>(r.keys.size()));
    for (absl::string_view k : r.keys) w.Bytes(k);
  }
  if (HasOneValue(r.op) || r.op == Op::kCompareSet || r.op == Op::kMultiSet) {
    for (absl::string_view v : r.values) w.Bytes(v);
  }
  if (HasNumber(r.op)) w.I64(r.number);
  return std::move(w).Finish();
}

absl::StatusOr<Request> DecodeRequest(absl::string_view payload) {
  WireReader in(payload);
  Request r;
  uint8_t op = 0;
  if (!in.U8(&op)) return absl::InvalidArgumentError("empty request frame");
  if (op < static_cast<uint8_t>(Op::kHello) ||
      op > static_cast<uint8_t>(Op::kDeletePrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown request op ", static_cast<int>(op)));
  }
  r.op = static_cast<Op>(op);
  if (r.op == Op::kHello) {
    uint32_t magic = 0, version = 0;
    absl::string_view token;
    if (!in.U32(&magic) || !in.U32(&version) || !in.Bytes(&token)) {
      return Truncated(r.op, "hello");
    }
    if (magic != kWireMagic) {
      return absl::InvalidArgumentError(
          absl::StrCat("hello has magic 0x", absl::Hex(magic),
                       "; expected 0x", absl::Hex(kWireMagic)));
    }
    r.number = version;
    r.values.push_back(token);
  } else {
    if (HasKeyField(r.op)) {
      absl::string_view key;
      if (!in.Bytes(&key)) return Truncated(r.op, "key");
      DEVMESH_RETURN_IF_ERROR(CheckKey(key));
      r.keys.push_back(key);
    }
    if (HasKeyList(r.op)) {
      uint32_t n = 0;
      if (!in.U32(&n)) return Truncated(r.op, "key count");
      if (n > kMaxKeysPerCall) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request has ", n, " keys; the limit is ", kMaxKeysPerCall));
      }
      // Each key takes at least 4 bytes (its length); refuse counts the
      // payload cannot hold before reserving memory for them.
      if (n > payload.size() / 4) return Truncated(r.op, "keys");
      r.keys.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        absl::string_view key;
        if (!in.Bytes(&key)) return Truncated(r.op, "keys");
        DEVMESH_RETURN_IF_ERROR(CheckKey(key));
        r.keys.push_back(key);
      }
    }
    size_t num_values = 0;
    if (HasOneValue(r.op)) num_values = 1;
    if (r.op == Op::kCompareSet) num_values = 2;
    if (r.op == Op::kMultiSet) num_values = r.keys.size();
    r.values.reserve(num_values);
    for (size_t i = 0; i < num_values; ++i) {
      absl::string_view value;
      if (!in.Bytes(&value)) return Truncated(r.op, "value");
      DEVMESH_RETURN_IF_ERROR(ValidateValue(value));
      r.values.push_back(value);
    }
    if (HasNumber(r.op)) {
      if (!in.I64(&r.number)) return Truncated(r.op, "number");
      if (HasTimeout(r.op) && r.number < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("request timeout ", r.number, " ms is negative"));
      }
    }
  }
  if (!in.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request op ", op, " has trailing bytes"));
  }
  return r;
}

void FrameParser::Feed(absl::string_view bytes) {
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
}

void FrameParser::ReleaseConsumed() {
  if (consumed_ != buffer_.size()) return;
  if (buffer_.capacity() > (size_t{64} << 10)) {
    std::string().swap(buffer_);
  } else {
    buffer_.clear();
  }
  consumed_ = 0;
}

absl::StatusOr<std::optional<absl::string_view>> FrameParser::Next() {
  absl::string_view rest(buffer_);
  rest.remove_prefix(consumed_);
  if (rest.size() < 4) return std::optional<absl::string_view>();
  const uint32_t len = absl::little_endian::Load32(rest.data());
  if (len > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame length ", len, " is over the limit of ", kMaxFrameBytes));
  }
  if (rest.size() - 4 < len) return std::optional<absl::string_view>();
  consumed_ += 4 + len;
  return std::optional<absl::string_view>(rest.substr(4, len));
}

std::string EncodeErrorReply(const absl::Status& status) {
  WireWriter w;
  w.U8(static_cast<uint8_t>(status.code())).Bytes(status.message());
  return std::move(w).Finish();
}

}  // namespace devmesh
