// devmesh/store/socket.h
// -----------------------------------------------------------------------------
// Socket: an owned TCP socket file descriptor (RAII, move-only) with the few
// operations the TCP store needs: connect with retries, listen on a port
// (0 = any free port), and send/receive with a deadline. Sockets are
// non-blocking; every wait is a poll() bounded by the caller's deadline.
// Connected sockets have TCP_NODELAY set (small request/reply frames).
//
// Thread-safety: a Socket is used by one thread at a time.
#ifndef DEVMESH_STORE_SOCKET_H_
#define DEVMESH_STORE_SOCKET_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace devmesh {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& other) noexcept : fd_(other.Release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();  // gives up ownership; returns the fd (or -1)
  void Close();

  // Connects to host:port (a name or an IPv4/IPv6 literal). While the peer
  // refuses or is unreachable (a server still starting), retries with
  // exponential backoff (10 ms doubling to 1 s) and +-50% jitter until
  // `deadline`; but once every try for `refused_for` has been refused
  // (ECONNREFUSED: the host answers and nothing listens on the port; a
  // server whose listen queue is full drops the connection instead, which
  // is not a refusal), it stops there. Errors: InvalidArgument (port outside
  // 1..65535, host that does not resolve), Unavailable naming host:port and
  // the last errno once the deadline passes or the refusals last
  // `refused_for`.
  static absl::StatusOr<Socket> Connect(
      const std::string& host, int port, absl::Time deadline,
      absl::Duration refused_for = absl::InfiniteDuration());

  // Whether `status` is Connect's error for a peer that refused every try
  // (read from its payload, not its text).
  static bool IsRefusal(const absl::Status& status);

  // Binds host:port (host "" or "::" = dual stack: an IPv6 wildcard socket
  // with IPV6_V6ONLY off, else 0.0.0.0 where IPv6 is unavailable; "0.0.0.0" =
  // every IPv4 interface only; port 0 = a free port, see LocalPort) with
  // SO_REUSEADDR and listens with the
  // backlog ListenBacklog(). Errors: InvalidArgument (port outside 0..65535,
  // bad host), Unavailable (address in use, ...) naming host:port.
  static absl::StatusOr<Socket> Listen(const std::string& host, int port);

  // The local port this socket is bound to.
  absl::StatusOr<int> LocalPort() const;

  // Sends all of `data`. Errors: DeadlineExceeded, Unavailable (peer gone).
  absl::Status SendAll(absl::string_view data, absl::Time deadline);
  // Receives exactly `n` bytes into `buf`. Errors: DeadlineExceeded,
  // Unavailable (peer closed or reset).
  absl::Status RecvAll(char* buf, size_t n, absl::Time deadline);

 private:
  // Waits for `events` on the socket until `deadline`.
  absl::Status PollFor(short events, absl::Time deadline);

  int fd_ = -1;
};

// The listen() backlog: the host's limit (/proc/sys/net/core/somaxconn),
// or SOMAXCONN where that cannot be read.
int ListenBacklog();

}  // namespace devmesh

#endif  // DEVMESH_STORE_SOCKET_H_
