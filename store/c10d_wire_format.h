// devmesh/store/c10d_wire_format.h
// -----------------------------------------------------------------------------
// PyTorch's c10d TCPStore wire protocol (PyTorch 2.4 and later), as a codec:
// the contract of torch/csrc/distributed/c10d/TCPStore.cpp (client) and
// TCPStoreLibUvBackend.cpp (server), verified against torch 2.15.0's own
// server and client (tests/interop). There is no framing: a request is
// one byte of query type followed by the fields of that query; integers are
// little-endian; a string is a u64 length then its bytes.
//
//   VALIDATE    u32 magic (kC10dMagic)       -> (no reply)   first message
//   PING        u32 nonce                    -> u32 nonce
//   SET         str key, str value           -> (no reply)
//   COMPARE_SET str key, str expected, str desired -> str value after
//   GET         str key                      -> str value ("" when missing)
//   ADD         str key, i64 delta           -> i64 new value (decimal text)
//   CHECK       u64 n, n x str key           -> u8 kC10dReady / kC10dNotReady
//   WAIT        u64 n, n x str key           -> u8 kC10dStopWaiting, when all set
//   CANCEL_WAIT (nothing)                    -> u8 kC10dWaitCanceled
//   GETNUMKEYS  (nothing)                    -> i64
//   DELETE_KEY  str key                      -> i64 number removed (0 or 1)
//   APPEND      str key, str bytes           -> (no reply)
//   MULTI_GET   u64 n, n x str key           -> n x str value
//   MULTI_SET   u64 n, n x (str key, str value) -> (no reply)
//   LIST_KEYS   (nothing)                    -> i64 n, n x str key (raw keys)
//   QUEUE_PUSH  str key, str value           -> (no reply)
//   QUEUE_POP   str key                      -> i64 length before, then
//                                               str value if it was > 0
//   QUEUE_LEN   str key                      -> i64
//   BARRIER     str key, i64 world_size      -> u8 kC10dStopWaiting, once
//                                               world_size calls arrived
//
// PyTorch's client puts "/" before every user key (kC10dKeyPrefix), and
// strips it from what LIST_KEYS returns (dropping keys without it).
// Those are all the query types torch 2.15's client sends (0..18); verified
// byte for byte against torch 2.15.0's own client and libuv server. A
// blocking queue_pop is a WAIT on the queue's key, then QUEUE_POP; a
// timed-out blocking pop or barrier sends CANCEL_WAIT. Any other type is
// InvalidArgument (the server drops the client, as torch's server does).
//
// A devmesh connection starts with a u32 frame length and op kHello (1); a
// c10d connection with the five bytes of VALIDATE. IsC10dGreeting tells them
// apart (a devmesh hello frame can never begin with those five bytes, because
// its length would be over kMaxFrameBytes).
//
// Limits applied when decoding (a violation is InvalidArgument): a key is at
// most kMaxKeyBytes + 1 bytes (the "/" PyTorch adds), a value at most
// kMaxValueBytes, a key count at most kMaxKeysPerCall, a whole request at most
// kMaxFrameBytes.
//
// Thread-safety: pure functions and a value type.
#ifndef DEVMESH_STORE_C10D_WIRE_FORMAT_H_
#define DEVMESH_STORE_C10D_WIRE_FORMAT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

inline constexpr uint32_t kC10dMagic = 0x3C85F7CE;  // validationMagicNumber
inline constexpr size_t kC10dGreetingBytes = 5;     // VALIDATE + magic
inline constexpr char kC10dKeyPrefix[] = "/";

enum class C10dQuery : uint8_t {
  kValidate = 0,
  kSet = 1,
  kCompareSet = 2,
  kGet = 3,
  kAdd = 4,
  kCheck = 5,
  kWait = 6,
  kGetNumKeys = 7,
  kDeleteKey = 8,
  kAppend = 9,
  kMultiGet = 10,
  kMultiSet = 11,
  kCancelWait = 12,
  kPing = 13,
  kQueuePush = 14,
  kQueuePop = 15,
  kQueueLen = 16,
  kListKeys = 17,
  kBarrier = 18,
};

inline constexpr uint8_t kC10dReady = 0;         // CheckResponseType::READY
inline constexpr uint8_t kC10dNotReady = 1;      // ::NOT_READY
inline constexpr uint8_t kC10dStopWaiting = 0;   // WaitResponseType
inline constexpr uint8_t kC10dWaitCanceled = 1;  // ::WAIT_CANCELED

// A c10d request. Views point into the bytes it was decoded from, or into
// strings the caller keeps alive while encoding.
//   keys:   SET/GET/ADD/COMPARE_SET/DELETE_KEY/APPEND/QUEUE_*/BARRIER: one;
//           CHECK/WAIT/MULTI_GET/MULTI_SET: n
//   values: SET/APPEND/QUEUE_PUSH: {value}; COMPARE_SET: {expected,
//           desired}; MULTI_SET: one per key
//   number: ADD: delta; BARRIER: world size; VALIDATE: magic; PING: nonce
struct C10dRequest {
  C10dQuery query = C10dQuery::kValidate;
  std::vector<absl::string_view> keys;
  std::vector<absl::string_view> values;
  int64_t number = 0;
};

// Encodes `request` (the client side).
std::string EncodeC10dRequest(const C10dRequest& request);

// True when `first` (at least kC10dGreetingBytes bytes of a new connection)
// begins with a c10d VALIDATE carrying kC10dMagic.
bool IsC10dGreeting(absl::string_view first);

// True when `first` (fewer bytes than that) may still grow into a greeting.
bool CouldBeC10dGreeting(absl::string_view first);

// The result of DecodeC10dRequest: a whole request and how many bytes of the
// input it used, or nothing yet with the number of bytes the input must have
// at least before another try can succeed.
struct C10dDecoded {
  std::optional<C10dRequest> request;
  size_t consumed = 0;    // with a request
  size_t need_bytes = 0;  // without one: retry when the input has this many
};

// How far DecodeC10dRequest got through the strings of a CHECK / WAIT /
// MULTI_GET / MULTI_SET that is not whole yet, so that the next try on more
// bytes of the same request resumes there instead of re-reading every
// string (which made a 1M-key MULTI_SET arriving in pieces quadratic and
// stalled the server's loop for seconds). Reset it (= {}) whenever a
// request was consumed; it is only valid for the request it was made on.
struct C10dScan {
  size_t pos = 0;        // offset in the request of the next string's length
  uint64_t strings = 0;  // strings known whole before `pos`
};

// Decodes the request at the start of `input` (the server side).
// InvalidArgument (naming the query and the field) on an unknown query type
// (over 18) or on a field over the limits above; the stream
// cannot be resynchronised then, so the caller drops the connection.
// `scan` (optional): kept by the caller between tries on one request, so
// that the work over all tries is linear in the request's size.
absl::StatusOr<C10dDecoded> DecodeC10dRequest(absl::string_view input,
                                              C10dScan* scan = nullptr);

// Appends c10d reply fields to `out` (the server side).
void AppendC10dU8(std::string& out, uint8_t v);
void AppendC10dU32(std::string& out, uint32_t v);
void AppendC10dI64(std::string& out, int64_t v);
void AppendC10dString(std::string& out, absl::string_view v);

}  // namespace devmesh

#endif  // DEVMESH_STORE_C10D_WIRE_FORMAT_H_
