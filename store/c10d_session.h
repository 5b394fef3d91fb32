// devmesh/store/c10d_session.h
// -----------------------------------------------------------------------------
// C10dSession: one c10d connection on devmesh's TcpStoreServer. It turns the
// c10d requests of the connection (store/c10d_wire_format.h) into devmesh
// request payloads for the StoreService, and the service's replies back into
// c10d replies, so the service and the server's event loop stay unaware of
// the second protocol. The server picks a session per connection by its
// first bytes (IsC10dGreeting).
//
// Mapping (c10d -> devmesh op -> c10d reply):
//   VALIDATE  -> kHello(version, hello_token)  -> none; refused: drop client
//   PING      -> (answered here)               -> the nonce
//   SET/MULTI_SET -> kSet/kMultiSet            -> none
//   GET       -> kGet, timeout 0               -> value; "" when missing
//   ADD, COMPARE_SET, DELETE_KEY, GETNUMKEYS, CHECK -> same op -> c10d form
//   WAIT      -> kWait, no timeout             -> STOP_WAITING when all set
//   CANCEL_WAIT -> (the server expires the parked WAIT or BARRIER)
//                                              -> WAIT_CANCELED
//   MULTI_GET -> kMultiGetOrEmpty              -> values; "" for a missing
//                key, as torch's libuv server (torch's client WAITs first)
//   APPEND    -> kAppend                       -> none (concatenate or
//                                                create; wakes waiters)
//   LIST_KEYS -> kListKeys                     -> every key, sorted, each
//                with the "/" torch's client strips (so get() finds it)
//   QUEUE_PUSH -> kQueuePush                   -> none (wakes one WAIT)
//   QUEUE_POP -> kQueuePop                     -> i64 length before, value
//   QUEUE_LEN -> kQueueLen                     -> i64
//   BARRIER   -> kBarrier(world_size)          -> STOP_WAITING once released
//   (store_service.h has the semantics of the queues and the barrier.)
// Pipelining: requests after a parked WAIT or BARRIER are decoded and served
// at once, as torch's server does (a SET sent after a WAIT, before its
// reply, can complete that WAIT); their replies go out before the parked
// request's. One request may be parked per connection: a second WAIT or
// BARRIER while one is parked drops the client (torch's client never sends
// one; torch's server would merge the two waits).
// Keys: the leading "/" PyTorch's client adds is removed, so the c10d key
// "/k" is devmesh's key "k" (a devmesh-protocol client and a torch client of
// one server share keys); keys without it ("init/") are kept as they are.
// torch's set("") sends "/", which becomes the empty key: the service
// stores it (as torch's servers do), though devmesh's own Store methods
// cannot name it.
// Errors: c10d has no error reply, so any service error (bad key, a value
// over the limits, an Append past kMaxValueBytes, Add or BARRIER on a
// non-number or overflow, a refused handshake) drops the client, as torch's
// servers do; the server logs the reason (TcpStoreServerOptions::log).
//
// Thread-safety: none; owned by the server's loop thread.
#ifndef DEVMESH_STORE_C10D_SESSION_H_
#define DEVMESH_STORE_C10D_SESSION_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/c10d_wire_format.h"

namespace devmesh {

class C10dSession {
 public:
  // `hello_token`: the token this session presents to the service on the
  // client's behalf ("" refuses c10d clients on a server that has a token).
  explicit C10dSession(std::string hello_token)
      : hello_token_(std::move(hello_token)) {}

  // Appends bytes read from the client's socket (any split of the stream).
  void Feed(absl::string_view bytes);
  // Bytes fed and not yet consumed by Next().
  size_t buffered() const { return buffer_.size() - consumed_; }

  // What the server does next for this connection.
  struct Step {
    enum Kind {
      kNeedMore,    // wait for bytes (or for the parked request)
      kClose,       // drop the client (`error` says why)
      kSendNow,     // send `bytes` (a c10d reply) to the client
      kForward,     // hand `bytes` (a devmesh payload) to the service
      kCancelWait,  // expire the parked request, then send `bytes`
    };
    Kind kind = kNeedMore;
    std::string bytes;
    std::string error;
  };
  // The next step. `parked`: the service holds a parked request of this
  // client; then a CANCEL_WAIT becomes kCancelWait, and a WAIT or BARRIER
  // is kClose.
  Step Next(bool parked);

  // The c10d reply for a service reply `frame` (a devmesh frame, length
  // prefix included) to the request of the last kForward step: bytes to send
  // (maybe none), or InvalidArgument (the reason) when the client must be
  // dropped; Internal when no forwarded request awaits a reply.
  absl::StatusOr<std::string> TranslateReply(absl::string_view frame);

  // The service parked the request of the last kForward step (it gave no
  // reply): its reply comes later, through TranslateParkedReply.
  void MarkParked();

  // As TranslateReply, for the parked request (completed or expired).
  absl::StatusOr<std::string> TranslateParkedReply(absl::string_view frame);

  // The parked request was expired by a CANCEL_WAIT: forget it.
  void DropParked();

 private:
  Step Forward(const C10dRequest& request);
  absl::StatusOr<std::string> Translate(C10dQuery query,
                                        absl::string_view frame);

  const std::string hello_token_;
  std::string buffer_;
  size_t consumed_ = 0;
  size_t need_ = 1;          // decode again once buffered() reaches this
  C10dScan scan_;            // progress through the request at consumed_
  bool validated_ = false;   // VALIDATE seen
  std::optional<C10dQuery> last_;    // forwarded, no reply translated yet
  std::optional<C10dQuery> parked_;  // parked in the service
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_C10D_SESSION_H_
