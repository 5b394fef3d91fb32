#include "store/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

absl::Status Errno(absl::string_view what, int err) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(err)));
}

void SetNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port,
                                    bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  if (passive) hints.ai_flags |= AI_PASSIVE;
  // An IP literal needs no name service (and 4096 clients connecting at once
  // should not each consult /etc/nsswitch.conf).
  unsigned char scratch[sizeof(in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), scratch) == 1 ||
      inet_pton(AF_INET6, host.c_str(), scratch) == 1) {
    hints.ai_flags |= AI_NUMERICHOST;
  }
  addrinfo* result = nullptr;
  const std::string service = absl::StrCat(port);
  const char* node = host.empty() ? nullptr : host.c_str();
  if (passive && node == nullptr) hints.ai_family = AF_INET;
  int rc = getaddrinfo(node, service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

// One non-blocking connect attempt, waiting until `deadline`. Returns the
// errno of the failure, 0 on success.
int TryConnect(const addrinfo* ai, absl::Time deadline, Socket* out) {
  Socket s(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                  ai->ai_protocol));
  if (!s.valid()) return errno;
  SetNonBlocking(s.fd());
  if (connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    pollfd p{s.fd(), POLLOUT, 0};
    const int64_t ms = std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now()) + 1);
    int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (rc == 0) return ETIMEDOUT;
    if (rc < 0) return errno;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return err;
  }
  int one = 1;
  setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *out = std::move(s);
  return 0;
}

// Marks Connect's error when every try was refused (IsRefusal).
constexpr absl::string_view kRefusalPayload = "devmesh.store/connect_refused";

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.Release();
  }
  return *this;
}

int Socket::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int ListenBacklog() {
  std::ifstream f("/proc/sys/net/core/somaxconn");
  int n = 0;
  if (f >> n && n > 0) return n;
  return SOMAXCONN;
}

bool Socket::IsRefusal(const absl::Status& status) {
  return status.GetPayload(kRefusalPayload).has_value();
}

absl::StatusOr<Socket> Socket::Connect(const std::string& host, int port,
                                       absl::Time deadline,
                                       absl::Duration refused_for) {
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("store port ", port, " is outside 1..65535"));
  }
  DEVMESH_ASSIGN_OR_RETURN(AddrInfoPtr addrs, Resolve(host, port, false));
  absl::BitGen gen;
  absl::Duration backoff = absl::Milliseconds(10);
  int last_err = 0;
  const absl::Time start = absl::Now();
  bool only_refused = true;  // every try so far was refused
  while (true) {
    for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
      Socket s;
      last_err = TryConnect(ai, deadline, &s);
      if (last_err == 0) return s;
      only_refused = only_refused && last_err == ECONNREFUSED;
    }
    const absl::Time now = absl::Now();
    if (only_refused && now - start >= refused_for) {
      absl::Status refused = absl::UnavailableError(absl::StrCat(
          "cannot connect to store at ", host, ":", port, ": refused for ",
          absl::FormatDuration(now - start), " (nothing listens there)"));
      refused.SetPayload(kRefusalPayload, absl::Cord("1"));
      return refused;
    }
    if (now >= deadline) break;
    absl::Duration sleep =
        std::min(deadline - now, backoff * absl::Uniform(gen, 0.5, 1.5));
    if (only_refused) {
      sleep = std::min(sleep, start + refused_for - now);
    }
    absl::SleepFor(sleep);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  absl::Status error = absl::UnavailableError(
      absl::StrCat("cannot connect to store at ", host, ":", port,
                   " before the deadline: ", strerror(last_err)));
  if (only_refused) error.SetPayload(kRefusalPayload, absl::Cord("1"));
  return error;
}

// A dual-stack wildcard listener on `port`: [::] with IPV6_V6ONLY off (what
// PyTorch's libuv server binds). Returns the errno on failure.
static int ListenDualStack(int port, Socket* out) {
  Socket s(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  int one = 1, zero = 0;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0) {
    return errno;
  }
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_any;
  addr.sin6_port = htons(static_cast<uint16_t>(port));
  if (bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(s.fd(), ListenBacklog()) != 0) {
    return errno;
  }
  SetNonBlocking(s.fd());
  *out = std::move(s);
  return 0;
}

absl::StatusOr<Socket> Socket::Listen(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("store port ", port, " is outside 0..65535"));
  }
  if (host.empty() || host == "::") {
    Socket s;
    const int err = ListenDualStack(port, &s);
    if (err == 0) return s;
    // No IPv6 here (EAFNOSUPPORT, EADDRNOTAVAIL): IPv4 only. A port in use
    // stays an error of the IPv4 try too.
    return Listen("0.0.0.0", port);
  }
  DEVMESH_ASSIGN_OR_RETURN(AddrInfoPtr addrs, Resolve(host, port, true));
  int last_err = 0;
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    Socket s(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol));
    if (!s.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(s.fd(), ListenBacklog()) != 0) {
      last_err = errno;
      continue;
    }
    SetNonBlocking(s.fd());
    return s;
  }
  return Errno(absl::StrCat("cannot listen on ", host, ":", port), last_err);
}

absl::StatusOr<int> Socket::LocalPort() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno("getsockname", errno);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

absl::Status Socket::PollFor(short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("store connection timed out");
    }
    pollfd p{fd_, events, 0};
    const int64_t ms = absl::ToInt64Milliseconds(left) + 1;
    int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return Errno("poll", errno);
  }
}

absl::Status Socket::SendAll(absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      DEVMESH_RETURN_IF_ERROR(PollFor(POLLOUT, deadline));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return Errno("store connection lost while sending", errno);
  }
  return absl::OkStatus();
}

absl::Status Socket::RecvAll(char* buf, size_t n, absl::Time deadline) {
  while (n > 0) {
    ssize_t got = recv(fd_, buf, n, 0);
    if (got > 0) {
      buf += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      return absl::UnavailableError("store connection closed by the server");
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      DEVMESH_RETURN_IF_ERROR(PollFor(POLLIN, deadline));
      continue;
    }
    if (errno == EINTR) continue;
    return Errno("store connection lost while receiving", errno);
  }
  return absl::OkStatus();
}

}  // namespace devmesh
