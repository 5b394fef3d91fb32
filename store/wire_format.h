// devmesh/store/wire_format.h
// -----------------------------------------------------------------------------
// The TCP store's wire format. Every message, both ways, is a frame:
//
//   frame   = u32 little-endian payload length (<= kMaxFrameBytes), payload
//   request = u8 op, fields of the op (below)
//   reply   = u8 absl::StatusCode, then on OK the op's result, else a string
//   string  = u32 little-endian length, bytes;   i64 = 8 bytes little-endian
//
// A connection starts with a kHello request: u32 kWireMagic, u32
// kWireVersion, string token; the server answers OK or PermissionDenied (bad
// token) / FailedPrecondition (other magic or version) and then closes. Ops
// and their fields (keys obey store_limits.h; `n` is a u32 count):
//   kSet key value -> -            kGet key timeout_ms -> value
//   kAdd key delta -> i64          kCompareSet key expected desired -> value
//   kWait n keys timeout_ms -> -   kCheck n keys -> u8 bool
//   kDeleteKey key -> u8 bool      kNumKeys -> i64
//   kMultiGet n keys timeout_ms -> n values   kMultiSet n keys n values -> -
//   kAppend key value -> -   (c10d's APPEND: concatenate, or create the key)
//   kListKeys -> n keys      (c10d's LIST_KEYS; sorted bytewise)
//   kQueuePush key value -> -   (c10d's QUEUE_PUSH: a FIFO per key, apart
//                                from the key table)
//   kQueuePop key -> i64 length before, then the value when it was > 0
//   kQueueLen key -> i64
//   kBarrier key world_size(i64) -> -   (c10d's BARRIER: adds 1 to the
//                                decimal counter at key; answered once it
//                                reaches world_size; no timeout: the client
//                                cancels)
//   kMultiGetOrEmpty n keys -> n values, "" for a missing key (c10d's
//                                MULTI_GET as torch's libuv server answers it)
//   kDeletePrefix prefix -> i64  (Store::DeletePrefix: the keys deleted)
// kAppend (12), kListKeys (13), the queue ops, kBarrier and
// kMultiGetOrEmpty (14..18) came
// after kWireVersion 1 without a version bump: only the server's own c10d
// sessions send them (devmesh's Store has none of them), and a server
// without them answers InvalidArgument "unknown request op N" and closes, so
// an old server refuses them clearly instead of misreading them. So does a
// server older than kDeletePrefix (19), which Store::DeletePrefix sends.
// Keys are 0 to kMaxKeyBytes bytes on the server side: the empty key is
// accepted (c10d's set("") stores it, as torch's servers do); devmesh's
// Store methods refuse "" before sending (store_limits.h).
// As in NCCL's socket layer, lengths are checked against the bytes present,
// so a truncated or oversized frame is an error, never an over-read.
//
// Thread-safety: FrameParser is a value owned by one connection; the rest are
// pure functions.
#ifndef DEVMESH_STORE_WIRE_FORMAT_H_
#define DEVMESH_STORE_WIRE_FORMAT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

inline constexpr uint32_t kWireMagic = 0x53564d44;  // "DMVS" on the wire
inline constexpr uint32_t kWireVersion = 1;
// The largest payload accepted in either direction (a MultiGet of many
// values must fit in one reply).
inline constexpr uint32_t kMaxFrameBytes = uint32_t{256} << 20;  // 256 MiB

enum class Op : uint8_t {
  kHello = 1,
  kSet = 2,
  kGet = 3,
  kAdd = 4,
  kCompareSet = 5,
  kWait = 6,
  kCheck = 7,
  kDeleteKey = 8,
  kNumKeys = 9,
  kMultiGet = 10,
  kMultiSet = 11,
  kAppend = 12,    // added after version 1 without a bump (see the top of this file)
  kListKeys = 13,  // likewise
  kQueuePush = 14,  // likewise
  kQueuePop = 15,   // likewise
  kQueueLen = 16,   // likewise
  kBarrier = 17,    // likewise
  kMultiGetOrEmpty = 18,  // likewise
  kDeletePrefix = 19,     // likewise
};

// A decoded request. Views point into the payload it was decoded from.
//   keys:   the key(s) of the op (one for Set/Get/Add/CompareSet/DeleteKey/
//           Append and the queue ops and Barrier)
//   values: Set/Append/QueuePush: {value}; CompareSet: {expected, desired};
//           MultiSet: values; Hello: {token}
//   number: Add: delta; Get/Wait/MultiGet: timeout in ms (>= 0);
//           Barrier: world size; Hello: version (magic is checked by the
//           decoder)
struct Request {
  Op op = Op::kHello;
  std::vector<absl::string_view> keys;
  std::vector<absl::string_view> values;
  int64_t number = 0;
};

// Encodes `request` as a whole frame (length prefix included).
std::string EncodeRequest(const Request& request);

// Decodes a request payload (without the length prefix). InvalidArgument on
// an unknown op, a truncated field, trailing bytes, a bad magic, or a key,
// value, count or timeout outside the limits; the message names the problem.
absl::StatusOr<Request> DecodeRequest(absl::string_view payload);

// Splits a byte stream into frames. Feed it bytes as they arrive; Next()
// returns each complete payload once.
class FrameParser {
 public:
  void Feed(absl::string_view bytes);
  // The next complete payload (valid until the next Feed or Next), nullopt
  // when more bytes are needed, or InvalidArgument when the length prefix is
  // over kMaxFrameBytes (the stream cannot be resynchronised then).
  absl::StatusOr<std::optional<absl::string_view>> Next();
  // Bytes received but not yet returned by Next.
  size_t buffered() const { return buffer_.size() - consumed_; }
  // Frees the buffer's memory when everything in it has been returned and it
  // has grown past 64 KiB (a big frame must not pin its memory per client).
  // Invalidates views returned by Next.
  void ReleaseConsumed();

 private:
  std::string buffer_;
  size_t consumed_ = 0;
};

// Builds a reply payload or frame.
class WireWriter {
 public:
  // `reserve`: expected frame size, to avoid regrowing for big requests.
  explicit WireWriter(size_t reserve = 64) {
    out_.reserve(reserve);
    out_.resize(4);  // room for the length prefix
  }
  WireWriter& U8(uint8_t v);
  WireWriter& U32(uint32_t v);
  WireWriter& I64(int64_t v);
  WireWriter& Bytes(absl::string_view v);  // u32 length + bytes
  // The frame: length prefix filled in.
  std::string Finish() &&;

 private:
  std::string out_;
};

// Reads fields from a payload, bounds-checked: each method returns false
// (and reads nothing) when the field does not fit in what is left.
class WireReader {
 public:
  explicit WireReader(absl::string_view data) : data_(data) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool I64(int64_t* v);
  bool Bytes(absl::string_view* v);
  bool empty() const { return data_.empty(); }

 private:
  absl::string_view data_;
};

// A reply frame carrying `status` (not OK) and its message.
std::string EncodeErrorReply(const absl::Status& status);

}  // namespace devmesh

#endif  // DEVMESH_STORE_WIRE_FORMAT_H_
