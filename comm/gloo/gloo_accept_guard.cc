// devmesh/comm/gloo/gloo_accept_guard.cc
// getpeername() for Debian Gloo's accept path: gloo_accept_guard.h says why.
#include "comm/gloo/gloo_accept_guard.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#ifndef SYS_getpeername
#error "devmesh's getpeername() guard needs the getpeername system call"
#endif

namespace devmesh {
namespace gloo_internal {
namespace {

std::atomic<int64_t> stepped_in{0};

enum class Caller { kGloo, kPassThrough, kOther };

// The base address of the object this file is linked into.
const void* OwnBase() {
  static const void* const base = [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<const void*>(&CountSteppedIn), &info) == 0) {
      return static_cast<const void*>(nullptr);
    }
    return static_cast<const void*>(info.dli_fbase);
  }();
  return base;
}

// Which object `code` lies in: libgloo.so.0 (Debian's Gloo, by file name);
// one to look past: this guard's own object, or a sanitizer runtime (GCC's
// libasan.so / libtsan.so / libubsan.so, whose getpeername() interceptor
// comes first in symbol order and calls this one, and whose backtrace()
// interceptor adds a frame of its own); anything else.
Caller CallerOf(const void* code) {
  Dl_info info;
  if (dladdr(code, &info) == 0 || info.dli_fname == nullptr) {
    return Caller::kOther;
  }
  if (info.dli_fbase != nullptr && info.dli_fbase == OwnBase()) {
    return Caller::kPassThrough;
  }
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base == nullptr ? info.dli_fname : base + 1;
  if (std::strncmp(base, "libgloo", 7) == 0) return Caller::kGloo;
  if (std::strncmp(base, "libasan", 7) == 0 ||
      std::strncmp(base, "libtsan", 7) == 0 ||
      std::strncmp(base, "libubsan", 8) == 0) {
    return Caller::kPassThrough;
  }
  return Caller::kOther;
}

}  // namespace

void CountSteppedIn() { stepped_in.fetch_add(1, std::memory_order_relaxed); }

// Whether the return addresses `callers` (innermost first) say Gloo made
// this call: the first one outside this guard's object and the sanitizer
// runtimes lies in libgloo.
bool CalledFromGloo(void* const* callers, int n) {
  for (int i = 0; i < n; ++i) {
    // A return address may sit just past its call's function: look one
    // byte back.
    switch (CallerOf(static_cast<const char*>(callers[i]) - 1)) {
      case Caller::kGloo:
        return true;
      case Caller::kPassThrough:
        continue;
      case Caller::kOther:
        return false;
    }
  }
  return false;
}

int64_t AcceptGuardSteppedIn() {
  return stepped_in.load(std::memory_order_relaxed);
}

}  // namespace gloo_internal
}  // namespace devmesh

extern "C" int getpeername(int fd, struct sockaddr* addr,
                           socklen_t* addrlen) noexcept {
  const long rv = syscall(SYS_getpeername, fd, addr, addrlen);
  if (rv == 0 || errno != ENOTCONN) return static_cast<int>(rv);
  if (addr == nullptr || addrlen == nullptr) {
    errno = ENOTCONN;
    return -1;
  }
  // Who called: this function's frame (and a sanitizer's backtrace()
  // interceptor's), then its callers. backtrace() unwinds by the binaries'
  // unwind tables, so it needs no frame pointers.
  void* frames[6];
  const int n = backtrace(frames, 6);
  if (!devmesh::gloo_internal::CalledFromGloo(frames, n)) {
    errno = ENOTCONN;
    return -1;
  }
  // The socket's own family, from its local address (still there after a
  // reset); then the unspecified address and port 0 of that family.
  sockaddr_storage self{};
  socklen_t self_len = sizeof(self);
  if (syscall(SYS_getsockname, fd, &self, &self_len) != 0) {
    errno = ENOTCONN;
    return -1;
  }
  sockaddr_storage unspecified{};
  unspecified.ss_family = self.ss_family;
  const socklen_t full = self.ss_family == AF_INET6
                             ? static_cast<socklen_t>(sizeof(sockaddr_in6))
                             : static_cast<socklen_t>(sizeof(sockaddr_in));
  std::memcpy(addr, &unspecified, std::min(*addrlen, full));
  *addrlen = full;
  devmesh::gloo_internal::CountSteppedIn();
  return 0;
}
