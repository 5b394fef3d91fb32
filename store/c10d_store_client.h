// devmesh/store/c10d_store_client.h
// -----------------------------------------------------------------------------
// C10dStoreClient: the Store over PyTorch's c10d TCPStore protocol
// (store/c10d_wire_format.h), so that devmesh ranks can use a store that
// PyTorch hosts: torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True),
// or a torch.distributed.TCPStore(is_master=True) in a Python rank. It also
// works against devmesh's own TcpStoreServer, which speaks c10d too.
//
// Keys: like PyTorch's own client, every key goes on the wire with a leading
// "/", so a key "k" here is the key "k" of a Python TCPStore client
// (store.set("k", ...)) on the same server.
//
// Each connection is opened as PyTorch's client opens one: VALIDATE with the
// magic, then PING with this process's id as the nonce, which must come back.
// As in TcpStoreClient, a call borrows an idle connection of a small pool or
// opens a new one, so a thread blocked in Get never holds up another thread.
//
// Set, MultiSet and Append (no reply in c10d) are each followed by a PING
// whose echo the call waits for: a call returns once the server has handled
// it, so calls from one thread reach the server in program order even over
// different pooled connections (PyTorch's client, with one connection, does
// not wait).
//
// Semantics follow store.h, with these c10d consequences:
// - Get and MultiGet are a WAIT on the key(s) (bounded by `timeout`; on
//   expiry CANCEL_WAIT, then DeadlineExceeded naming the first missing key,
//   as TcpStoreClient) followed by GET / MULTI_GET, as PyTorch's client does.
// - A c10d server has no error replies: on bad input (a non-numeric value
//   under Add, a value over its limits: 8 MiB on torch's libuv server) it
//   closes the connection. Add then reads the key on a new connection and
//   returns InvalidArgument when it holds no decimal int64; other such cases
//   are Unavailable ("the c10d server closed the connection").
// - torch's server reads an Add's old value with std::stoll, so "12abc" counts
//   as 12 there (devmesh's own server rejects it); overflow is not detected by
//   torch's server.
// - NumKeys counts every key of the server, PyTorch's own included.
// - A devmesh server with a token refuses c10d clients unless it was started
//   with TcpStoreServerOptions::c10d_clients_with_token (the c10d handshake
//   carries no token); Connect then fails with Unavailable.
//
// New connections after the first: the server can only be starting before
// the first connection; after it, a refusal means it has stopped (its host
// is up, its process gone). So a later connection is retried while refused
// for reconnect_refused_timeout only (the call then fails with Unavailable,
// Socket::IsRefusal true), and once one was refused that long, each later
// one is tried once until one succeeds: callers that outlive the store
// (a rank's exit path) end within about a second, not connect_timeout.
//
// Errors of Connect: InvalidArgument (bad port, host that does not resolve),
// Unavailable (not reachable before connect_timeout, or the server closed the
// connection or answered the PING wrongly: not a c10d TCPStore).
//
// Thread-safety: every method may be called from any number of threads.
#ifndef DEVMESH_STORE_C10D_STORE_CLIENT_H_
#define DEVMESH_STORE_C10D_STORE_CLIENT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sync/annotated_mutex.h"
#include "store/c10d_wire_format.h"
#include "store/socket.h"
#include "store/store.h"
#include "absl/base/thread_annotations.h"

namespace devmesh {

struct C10dStoreClientOptions {
  std::string host = "127.0.0.1";  // name or IP literal (IPv6 bare)
  int port = 0;                    // 1..65535
  // How long Connect (and each later new connection) keeps retrying while
  // the server is not up yet.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Store::default_timeout(), and the reply deadline of non-waiting calls.
  absl::Duration default_timeout = absl::Seconds(300);
  // How long a new connection after the first keeps retrying while the
  // server's host refuses it (see the top of this file).
  absl::Duration reconnect_refused_timeout = absl::Seconds(1);
};

class C10dStoreClient : public Store {
 public:
  // Connects (retrying until options.connect_timeout), sends VALIDATE and
  // checks a PING echo. Errors: see "Errors of Connect" at the top of this file.
  static absl::StatusOr<std::unique_ptr<C10dStoreClient>> Connect(
      const C10dStoreClientOptions& options);

  absl::Duration default_timeout() const override {
    return options_.default_timeout;
  }
  // Store's methods; errors as in store.h and at the top of this file.
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

  // c10d's APPEND (not part of Store): appends `value` to `key`, creating it
  // when missing. Errors as Set.
  absl::Status Append(absl::string_view key, absl::string_view value);

 private:
  explicit C10dStoreClient(C10dStoreClientOptions options)
      : options_(std::move(options)) {}

  // A new connection, shaken hands with. `first`: Connect's, retried while
  // refused for connect_timeout; else bounded as the top of this file says.
  absl::StatusOr<Socket> Open(bool first) const;
  absl::StatusOr<Socket> Borrow();
  void Return(Socket s);
  // WAIT on `keys` (user keys, without "/") over `s`; DeadlineExceeded after
  // CANCEL_WAIT when `timeout` passes.
  absl::Status WaitOn(Socket& s, absl::Span<const std::string> keys,
                      absl::Duration timeout);

  const C10dStoreClientOptions options_;
  // A new connection was refused for reconnect_refused_timeout: the server
  // has stopped; later ones are tried once, until one succeeds.
  mutable std::atomic<bool> server_stopped_{false};
  sync_internal::Mutex mu_;
  std::vector<Socket> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_C10D_STORE_CLIENT_H_
