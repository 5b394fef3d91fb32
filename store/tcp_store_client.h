// devmesh/store/tcp_store_client.h
// -----------------------------------------------------------------------------
// TcpStoreClient: the Store over TCP (the client side of TcpStoreServer).
// Each call is one request/reply round trip on a connection of a small pool:
// a call borrows an idle connection or opens a new one, so a thread blocked
// in Get never holds up another thread's Set on the same client. Calls from
// one thread complete in order, so the server sees them in program order.
//
// Timeouts: Get/Wait/MultiGet wait at most their `timeout` (the server answers
// DeadlineExceeded then; the client gives up by itself timeout + 5 s later if
// the server is gone quiet). Every other call waits at most
// options.default_timeout for its reply (DeadlineExceeded).
// A connection that fails or times out is dropped, never reused.
//
// A server that has stopped: once the first connection was made, a new one
// the server's host refuses (nothing listens on the port any more) is
// retried for options.reconnect_refused_timeout only, not connect_timeout;
// after such a refusal every later new connection is tried once until one
// succeeds. So with the store gone each call fails within about a second,
// and the next ones at once: the exits of a job whose store host died stay
// bounded (Bootstrap::Leave, the failure watch's stop).
//
// Thread-safety: every method may be called from any number of threads.
#ifndef DEVMESH_STORE_TCP_STORE_CLIENT_H_
#define DEVMESH_STORE_TCP_STORE_CLIENT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sync/annotated_mutex.h"
#include "store/socket.h"
#include "store/store.h"
#include "store/wire_format.h"
#include "absl/base/thread_annotations.h"

namespace devmesh {

struct TcpStoreClientOptions {
  std::string host = "127.0.0.1";  // name or IP literal of the server
  int port = 0;                    // the server's port, 1..65535
  std::string token;               // must match the server's token
  // How long Connect (and each later new connection) keeps retrying while the
  // server is not up yet (it may still be starting).
  absl::Duration connect_timeout = absl::Seconds(60);
  // Store::default_timeout(), and the reply deadline of non-waiting calls.
  absl::Duration default_timeout = absl::Seconds(300);
  // How long a connected peer has to answer Connect's handshake (a devmesh
  // store answers at once, even under a rendezvous of thousands of clients);
  // past it, Connect fails naming the address: whatever listens there is not
  // a store (or not a devmesh-protocol one). The later connections a client
  // opens for concurrent calls wait up to the call's own deadline instead
  // (its wait, or default_timeout; never less than this): the store is
  // known by then, and one starved of CPU (1024 ranks on 2 cores) took
  // longer than 5 s to answer.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // How long a new connection after the first keeps retrying while the
  // server's host refuses it (see the top of this file). The server can only
  // be starting before the first connection; after it, a refusal means it
  // has stopped.
  absl::Duration reconnect_refused_timeout = absl::Seconds(1);
};

class TcpStoreClient : public Store {
 public:
  // Connects and shakes hands. Errors: InvalidArgument (bad port, host that
  // does not resolve), Unavailable (server not reachable before
  // connect_timeout; or a peer that accepted the connection but did not
  // answer the handshake within handshake_timeout, or answered something
  // that is not a store reply, naming host:port), PermissionDenied (wrong or
  // missing token), FailedPrecondition (protocol version mismatch).
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(
      const TcpStoreClientOptions& options);

  absl::Duration default_timeout() const override {
    return options_.default_timeout;
  }
  // Store's methods; errors as in store.h, plus Unavailable when the
  // connection is lost or cannot be re-opened.
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> DeletePrefix(absl::string_view prefix) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  using Store::Get;
  using Store::Wait;

 private:
  explicit TcpStoreClient(TcpStoreClientOptions options)
      : options_(std::move(options)) {}

  // Opens a connection and shakes hands. The first (Connect) gets
  // handshake_timeout to prove the peer is a devmesh store; a later one
  // (for another concurrent call) talks to the store the first proved, and
  // an overloaded store may be slow: it gets until the call's own deadline
  // `call_deadline` (its wait, or default_timeout), at least
  // handshake_timeout.
  absl::StatusOr<Socket> Open(bool first, absl::Time call_deadline) const;
  // One round trip: returns the OK reply's result bytes, or the error the
  // server sent. `wait` is the server-side wait of the request (0 if none).
  absl::StatusOr<std::string> Call(const Request& request,
                                   absl::Duration wait);

  const TcpStoreClientOptions options_;
  // A new connection was refused for reconnect_refused_timeout: the server
  // has stopped; later ones are tried once, until one succeeds.
  mutable std::atomic<bool> server_stopped_{false};
  sync_internal::Mutex mu_;
  std::vector<Socket> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_TCP_STORE_CLIENT_H_
