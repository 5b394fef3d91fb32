// devmesh/store/tcp_store_server.h
// -----------------------------------------------------------------------------
// TcpStoreServer: the server side of the TCP store (rank 0 hosts it, like
// c10d's TCPStore master). It runs a libuv event loop on its own thread, so
// one thread serves every client without a thread per connection (the design
// of PyTorch's libuv TCPStore backend). Gets and Waits on missing keys are
// parked in the server and answered when the keys arrive or when their
// timeout passes (DeadlineExceeded), never polled.
//
// Protocols: each connection speaks devmesh's protocol (wire_format.h) or
// PyTorch's c10d TCPStore protocol (c10d_wire_format.h, c10d_session.h), told
// apart by its first five bytes, so torch.distributed.TCPStore(host, port,
// is_master=False) in a Python process can use a store a devmesh rank hosts.
// Both see one key space (a c10d key "/k" is the devmesh key "k").
//
// Robustness: a client that sends a malformed frame, a length over
// kMaxFrameBytes, an unknown op, a bad handshake, or that vanishes mid-frame
// is dropped (after an error reply where a reply makes sense); the other
// clients and the data are untouched. The same holds for c10d clients, which
// are dropped without a reply (c10d has no error replies) on a malformed or
// oversized request, an unknown query type (over 18), a refused op, or a
// second WAIT/BARRIER while one is parked (c10d_session.h); each such drop
// is logged with its reason (options.log). Every query torch 2.15's client
// sends is served, the queue ops and BARRIER included, and requests
// pipelined behind a parked WAIT are served at once.
//
// Thread-safety: Start, port and the destructor may be called from any
// thread; the data lives on the loop thread only.
#ifndef DEVMESH_STORE_TCP_STORE_SERVER_H_
#define DEVMESH_STORE_TCP_STORE_SERVER_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

struct TcpStoreServerOptions {
  // Address to bind: "" or "::" = every interface of both families (an IPv6
  // socket with IPV6_V6ONLY off, as PyTorch's libuv server; falls back to
  // 0.0.0.0 where IPv6 is unavailable), "0.0.0.0" = every IPv4 interface,
  // "127.0.0.1" = loopback only, or a name / IPv6 literal.
  std::string host = "";
  // 0 = pick a free port (read it back with port()).
  int port = 0;
  // When not empty, a client must present this token in its handshake, else
  // it is answered PermissionDenied and dropped.
  std::string token;
  // A c10d client's handshake has no token field. With a token set, c10d
  // clients are refused (dropped after VALIDATE) unless this is true; then
  // they are served without one (only turn it on where the network is
  // trusted, e.g. for a torch rank in the same job). No effect without a
  // token: c10d clients are served then.
  bool c10d_clients_with_token = false;
  // Where the server logs why it dropped a c10d client (one line, no
  // newline, naming the peer). Called on the server's loop thread; it must
  // not block or call back into the server. Unset: a line on stderr.
  std::function<void(absl::string_view)> log;
};

// What a server has served so far (TcpStoreServer::stats).
struct TcpStoreServerStats {
  int64_t connections = 0;    // clients accepted
  int64_t requests = 0;       // requests handled (both protocols)
  int64_t request_bytes = 0;  // their payload bytes, as received
};

class TcpStoreServer {
 public:
  // Binds, listens (backlog = the host's somaxconn) and starts the loop
  // thread. Errors: InvalidArgument (bad port or host), Unavailable (port in
  // use or other socket error, naming host:port), Internal (libuv failure).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const TcpStoreServerOptions& options);

  // Like Start, on a socket the caller already bound and set listening
  // (`listening_fd`, owned from now on; options.host/port are ignored). Lets
  // a parent process learn the port, fork children, and only then start the
  // loop thread (bootstrap/testing/multiprocess.h).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> StartOnFd(
      int listening_fd, const TcpStoreServerOptions& options);

  // Stops the loop, drops every client and joins the thread.
  ~TcpStoreServer();

  // The port the server listens on (the chosen one when options.port was 0).
  int port() const { return port_; }

  // Counts so far; read from any thread (relaxed atomics: each field is
  // exact, the three may be a few requests apart).
  TcpStoreServerStats stats() const;

  class Impl;  // defined in tcp_store_server.cc

 private:
  TcpStoreServer(std::unique_ptr<Impl> impl, int port);

  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_TCP_STORE_SERVER_H_
