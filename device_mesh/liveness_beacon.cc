// The liveness beacon and its probe (liveness_beacon.h).
#include "device_mesh/liveness_beacon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

constexpr char kGreeting[] = "devmesh-beacon ";
// Connections a beacon holds at most; past it new ones wait in the backlog
// (their probers time out and leave it to the lease).
constexpr size_t kMaxHeld = 16384;
// A connect or a greeting that takes longer gives up (the lease decides),
// and a probe that gave up tries again after kRetry.
constexpr absl::Duration kStepLimit = absl::Seconds(2);
constexpr absl::Duration kRetry = absl::Seconds(5);

// Accepts, greets and holds connections until their other end closes them;
// never closes the listener.
void Serve(int listener, std::string greeting) {
  std::vector<pollfd> fds = {{listener, POLLIN, 0}};
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    for (size_t i = fds.size(); i-- > 1;) {
      if (fds[i].revents == 0) continue;
      char buf[64];
      const ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) continue;
      ::close(fds[i].fd);  // its other end closed it
      fds[i] = fds.back();
      fds.pop_back();
    }
    if ((fds[0].revents & POLLIN) != 0 && fds.size() <= kMaxHeld) {
      const int c = ::accept4(listener, nullptr, nullptr,
                              SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c >= 0) {
        // A few bytes into an empty send buffer: never short.
        (void)::send(c, greeting.data(), greeting.size(), MSG_NOSIGNAL);
        fds.push_back({c, POLLIN | POLLRDHUP, 0});
      }
    }
    fds[0].events = fds.size() <= kMaxHeld ? POLLIN : 0;
  }
}

BeaconInfo Listen() {
  BeaconInfo info;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return info;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return info;
  }
  std::random_device rd;
  info.nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  if (info.nonce == 0) info.nonce = 1;
  info.port = ntohs(addr.sin_port);
  try {
    std::thread(Serve, fd, absl::StrCat(kGreeting, info.nonce, "\n")).detach();
  } catch (const std::system_error&) {
    ::close(fd);
    return BeaconInfo();
  }
  return info;
}

}  // namespace

BeaconInfo StartBeacon() {
  static std::once_flag once;
  static BeaconInfo info;
  std::call_once(once, [] { info = Listen(); });
  return info;
}

bool IsLoopbackIPv4(const std::string& host) {
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 &&
         (ntohl(a.s_addr) >> 24) == 127;
}

BeaconProbe::BeaconProbe(std::string host, int port, uint64_t nonce,
                         bool credible_refusal)
    : host_(std::move(host)),
      port_(port),
      nonce_(nonce),
      credible_refusal_(credible_refusal) {}

BeaconProbe::~BeaconProbe() { CloseFd(); }

void BeaconProbe::CloseFd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void BeaconProbe::GiveUp() {
  CloseFd();
  step_ = Step::kWait;
  step_since_ = absl::Now();
}

void BeaconProbe::Refused() {
  CloseFd();
  if (verified_ || credible_refusal_) {
    step_ = Step::kGone;
  } else {
    GiveUp();
  }
}

void BeaconProbe::Connect() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  if (port_ <= 0 || port_ > 65535 ||
      ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1) {
    GiveUp();
    return;
  }
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    GiveUp();
    return;
  }
  step_since_ = absl::Now();
  greeting_.clear();
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    step_ = Step::kGreeting;
  } else if (errno == EINPROGRESS) {
    step_ = Step::kConnecting;
  } else if (errno == ECONNREFUSED) {
    Refused();
  } else {
    GiveUp();
  }
}

BeaconState BeaconProbe::Poll() {
  // At most a few steps per call (a connect that completes at once goes on
  // to its greeting).
  for (int steps = 0; steps < 4; ++steps) {
    switch (step_) {
      case Step::kGone:
        return BeaconState::kGone;
      case Step::kWait:
        if (absl::Now() - step_since_ < kRetry) return BeaconState::kUnknown;
        step_ = Step::kIdle;
        continue;
      case Step::kIdle:
        Connect();
        continue;
      case Step::kConnecting: {
        // A refusal or an accept comes back within a round trip: the first
        // look waits up to 2 ms for it, so that a caller that polls once a
        // slice learns it at once.
        pollfd p{fd_, POLLOUT, 0};
        const int wait_ms =
            absl::Now() - step_since_ < absl::Milliseconds(2) ? 2 : 0;
        if (::poll(&p, 1, wait_ms) <= 0) {
          if (absl::Now() - step_since_ >= kStepLimit) GiveUp();
          return BeaconState::kUnknown;
        }
        int error = 0;
        socklen_t len = sizeof(error);
        if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
          error = errno;
        }
        if (error == 0) {
          step_ = Step::kGreeting;
        } else if (error == ECONNREFUSED) {
          Refused();
        } else {
          GiveUp();
        }
        continue;
      }
      case Step::kGreeting: {
        char buf[64];
        const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
          if (absl::Now() - step_since_ >= kStepLimit) GiveUp();
          return BeaconState::kUnknown;
        }
        if (n <= 0) {
          // Closed before it greeted: a verified address is asked again
          // (refused: gone); else the beacon cannot tell.
          CloseFd();
          if (verified_) {
            step_ = Step::kIdle;
            continue;
          }
          GiveUp();
          return BeaconState::kUnknown;
        }
        greeting_.append(buf, static_cast<size_t>(n));
        const size_t eol = greeting_.find('\n');
        if (eol == std::string::npos) {
          if (greeting_.size() > 64) GiveUp();
          continue;
        }
        absl::string_view line(greeting_.data(), eol);
        uint64_t nonce = 0;
        if (!absl::ConsumePrefix(&line, kGreeting) ||
            !absl::SimpleAtoi(line, &nonce) || nonce != nonce_) {
          GiveUp();  // someone else's port
          return BeaconState::kUnknown;
        }
        verified_ = true;
        step_ = Step::kConnected;
        return BeaconState::kAlive;
      }
      case Step::kConnected: {
        pollfd p{fd_, POLLIN | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) <= 0) return BeaconState::kAlive;
        char buf[64];
        const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
          return BeaconState::kAlive;
        }
        // Its end closed: ask again (refused: gone; greeted: alive).
        CloseFd();
        step_ = Step::kIdle;
        continue;
      }
    }
  }
  return step_ == Step::kGone ? BeaconState::kGone : BeaconState::kUnknown;
}

}  // namespace device_mesh_internal
}  // namespace devmesh
