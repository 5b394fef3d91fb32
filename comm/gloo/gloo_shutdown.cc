// devmesh/comm/gloo/gloo_shutdown.cc
#include "comm/gloo/gloo_shutdown.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace devmesh {
namespace gloo_internal {
namespace {

bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port &&
           std::memcmp(&x->sin_addr, &y->sin_addr, sizeof(in_addr)) == 0;
  }
  if (a.ss_family == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(&a);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
    return x->sin6_port == y->sin6_port &&
           std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

int ShutdownConnections(const std::vector<ConnectionEnd>& ends) {
  if (ends.empty()) return 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int self = dirfd(dir);
  int done = 0;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      continue;
    }
    sockaddr_storage local{}, remote{};
    socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
    const bool has_local =
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local),
                    &local_len) == 0;
    const bool has_remote =
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&remote),
                    &remote_len) == 0;
    if (!has_remote) continue;  // listening or unconnected: not a connection
    for (const ConnectionEnd& want : ends) {
      const bool match = want.local ? (has_local && SameAddress(local, want.addr))
                                    : SameAddress(remote, want.addr);
      if (match) {
        if (shutdown(static_cast<int>(fd), SHUT_RDWR) == 0) ++done;
        break;
      }
    }
  }
  closedir(dir);
  return done;
}

}  // namespace gloo_internal
}  // namespace devmesh
