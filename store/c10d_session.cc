#include "store/c10d_session.h"

#include "absl/base/internal/endian.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "store/wire_format.h"

namespace devmesh {
namespace {

// A c10d WAIT has no server-side timeout; the service needs one, so it gets
// one of about 35 years.
constexpr int64_t kForeverMs = int64_t{1} << 40;

absl::string_view DevmeshKey(absl::string_view c10d_key) {
  absl::ConsumePrefix(&c10d_key, kC10dKeyPrefix);
  return c10d_key;
}

std::string Payload(const Request& r) {
  std::string frame = EncodeRequest(r);
  return frame.substr(4);  // the service takes payloads without the length
}

absl::Status Malformed(C10dQuery q) {
  return absl::InternalError(absl::StrCat(
      "store service reply to c10d query ", static_cast<int>(q),
      " is shorter than its result"));
}

}  // namespace

void C10dSession::Feed(absl::string_view bytes) {
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
}

C10dSession::Step C10dSession::Next(bool parked) {
  Step step;
  if (buffered() < need_) return step;
  absl::string_view rest(buffer_);
  rest.remove_prefix(consumed_);
  absl::StatusOr<C10dDecoded> decoded = DecodeC10dRequest(rest, &scan_);
  if (!decoded.ok()) {
    step.kind = Step::kClose;
    step.error = std::string(decoded.status().message());
    return step;
  }
  if (!decoded->request) {
    need_ = decoded->need_bytes;
    return step;
  }
  const C10dRequest& r = *decoded->request;
  if (parked &&
      (r.query == C10dQuery::kWait || r.query == C10dQuery::kBarrier)) {
    step.kind = Step::kClose;
    step.error = absl::StrCat(
        "c10d query ", static_cast<int>(r.query),
        " (WAIT or BARRIER) arrived while an earlier WAIT or BARRIER of the "
        "connection was still waiting; devmesh serves one at a time per "
        "connection");
    return step;
  }
  step = Forward(r);  // copies what it needs out of the buffer
  consumed_ += decoded->consumed;
  need_ = 1;
  scan_ = C10dScan();
  if (consumed_ == buffer_.size()) {
    if (buffer_.capacity() > (size_t{64} << 10)) {
      std::string().swap(buffer_);
    } else {
      buffer_.clear();
    }
    consumed_ = 0;
  }
  if (r.query == C10dQuery::kCancelWait && parked) {
    step.kind = Step::kCancelWait;
  }
  return step;
}

C10dSession::Step C10dSession::Forward(const C10dRequest& r) {
  Step step;
  step.kind = Step::kForward;
  if (!validated_ && r.query != C10dQuery::kValidate) {
    step.kind = Step::kClose;
    step.error = "the first c10d request must be VALIDATE";
    return step;
  }
  Request d;
  switch (r.query) {
    case C10dQuery::kValidate:
      if (validated_ || r.number != int64_t{kC10dMagic}) {
        step.kind = Step::kClose;
        step.error = "a second or a wrong c10d VALIDATE";
        return step;
      }
      validated_ = true;
      d.op = Op::kHello;
      d.number = kWireVersion;
      d.values.push_back(hello_token_);
      break;
    case C10dQuery::kPing:
      step.kind = Step::kSendNow;
      AppendC10dU32(step.bytes, static_cast<uint32_t>(r.number));
      return step;
    case C10dQuery::kCancelWait:
      // Parked: the server expires the wait first (Next sets the kind).
      step.kind = Step::kSendNow;
      AppendC10dU8(step.bytes, kC10dWaitCanceled);
      return step;
    case C10dQuery::kSet:
      d.op = Op::kSet;
      d.values.push_back(r.values[0]);
      break;
    case C10dQuery::kGet:
      d.op = Op::kGet;  // timeout 0: a missing key answers at once
      break;
    case C10dQuery::kAdd:
      d.op = Op::kAdd;
      d.number = r.number;
      break;
    case C10dQuery::kCompareSet:
      d.op = Op::kCompareSet;
      d.values = r.values;
      break;
    case C10dQuery::kCheck:
      d.op = Op::kCheck;
      break;
    case C10dQuery::kWait:
      d.op = Op::kWait;
      d.number = kForeverMs;
      break;
    case C10dQuery::kGetNumKeys:
      d.op = Op::kNumKeys;
      break;
    case C10dQuery::kDeleteKey:
      d.op = Op::kDeleteKey;
      break;
    case C10dQuery::kMultiGet:
      d.op = Op::kMultiGetOrEmpty;  // "" for a missing key, as torch's server
      break;
    case C10dQuery::kMultiSet:
      d.op = Op::kMultiSet;
      d.values = r.values;
      break;
    case C10dQuery::kListKeys:
      d.op = Op::kListKeys;
      break;
    case C10dQuery::kAppend:
      d.op = Op::kAppend;
      d.values.push_back(r.values[0]);
      break;
    case C10dQuery::kQueuePush:
      d.op = Op::kQueuePush;
      d.values.push_back(r.values[0]);
      break;
    case C10dQuery::kQueuePop:
      d.op = Op::kQueuePop;
      break;
    case C10dQuery::kQueueLen:
      d.op = Op::kQueueLen;
      break;
    case C10dQuery::kBarrier:
      d.op = Op::kBarrier;
      d.number = r.number;
      break;
  }
  for (absl::string_view k : r.keys) d.keys.push_back(DevmeshKey(k));
  step.bytes = Payload(d);
  last_ = r.query;
  return step;
}

void C10dSession::MarkParked() {
  parked_ = last_;
  last_.reset();
}

absl::StatusOr<std::string> C10dSession::TranslateParkedReply(
    absl::string_view frame) {
  if (!parked_) {
    return absl::InternalError("a parked store reply with no c10d request "
                               "parked");
  }
  const C10dQuery q = *parked_;
  parked_.reset();
  return Translate(q, frame);
}

absl::StatusOr<std::string> C10dSession::TranslateReply(
    absl::string_view frame) {
  if (!last_) {
    return absl::InternalError("a store reply with no c10d request pending");
  }
  const C10dQuery q = *last_;
  last_.reset();
  return Translate(q, frame);
}

absl::StatusOr<std::string> C10dSession::Translate(C10dQuery q,
                                                   absl::string_view frame) {
  WireReader in(frame.size() >= 4 ? frame.substr(4) : absl::string_view());
  uint8_t code = 0;
  if (!in.U8(&code)) return Malformed(q);
  std::string out;
  if (code != 0) {
    if (q == C10dQuery::kGet &&
        code == static_cast<uint8_t>(absl::StatusCode::kDeadlineExceeded)) {
      AppendC10dString(out, "");  // torch's libuv server: missing -> empty
      return out;
    }
    absl::string_view message;
    in.Bytes(&message);
    return absl::InvalidArgumentError(
        absl::StrCat("c10d query ", static_cast<int>(q), " refused: ",
                     message));
  }
  switch (q) {
    case C10dQuery::kGet:
    case C10dQuery::kCompareSet: {
      absl::string_view v;
      if (!in.Bytes(&v)) return Malformed(q);
      AppendC10dString(out, v);
      break;
    }
    case C10dQuery::kAdd:
    case C10dQuery::kGetNumKeys:
    case C10dQuery::kQueueLen: {
      int64_t n = 0;
      if (!in.I64(&n)) return Malformed(q);
      AppendC10dI64(out, n);
      break;
    }
    case C10dQuery::kCheck: {
      uint8_t all = 0;
      if (!in.U8(&all)) return Malformed(q);
      AppendC10dU8(out, all ? kC10dReady : kC10dNotReady);
      break;
    }
    case C10dQuery::kDeleteKey: {
      uint8_t existed = 0;
      if (!in.U8(&existed)) return Malformed(q);
      AppendC10dI64(out, existed ? 1 : 0);
      break;
    }
    case C10dQuery::kWait:
    case C10dQuery::kBarrier:
      AppendC10dU8(out, kC10dStopWaiting);
      break;
    case C10dQuery::kQueuePop: {
      int64_t length = 0;
      if (!in.I64(&length)) return Malformed(q);
      AppendC10dI64(out, length);
      if (length > 0) {
        absl::string_view v;
        if (!in.Bytes(&v)) return Malformed(q);
        AppendC10dString(out, v);
      }
      break;
    }
    case C10dQuery::kMultiGet: {
      uint32_t n = 0;
      if (!in.U32(&n)) return Malformed(q);
      for (uint32_t i = 0; i < n; ++i) {
        absl::string_view v;
        if (!in.Bytes(&v)) return Malformed(q);
        AppendC10dString(out, v);
      }
      break;
    }
    case C10dQuery::kListKeys: {
      // c10d's keys are raw: give each the "/" torch's client strips again,
      // so every listed key is one its get() finds.
      uint32_t n = 0;
      if (!in.U32(&n)) return Malformed(q);
      AppendC10dI64(out, n);
      for (uint32_t i = 0; i < n; ++i) {
        absl::string_view k;
        if (!in.Bytes(&k)) return Malformed(q);
        AppendC10dString(out, absl::StrCat(kC10dKeyPrefix, k));
      }
      break;
    }
    default:  // VALIDATE, SET, MULTI_SET, APPEND, QUEUE_PUSH: no reply
      break;
  }
  return out;
}

void C10dSession::DropParked() { parked_.reset(); }

}  // namespace devmesh
