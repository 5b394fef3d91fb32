// devmesh/comm/gloo/gloo_shutdown.cc
#include "comm/gloo/gloo_shutdown.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>

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

// Calls `fn(dup_fd, inode)` for a duplicate of each socket descriptor of
// this process (closed after the call), so that a descriptor closed and
// reused by another thread meanwhile is at worst another socket, never a
// half-checked one.
void ForEachSocket(const std::function<void(int, ino_t)>& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int self = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    const int dup = fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 0);
    if (dup < 0) continue;
    struct stat st;
    if (fstat(dup, &st) == 0 && S_ISSOCK(st.st_mode)) fn(dup, st.st_ino);
    close(dup);
  }
  closedir(dir);
}

}  // namespace

std::map<int, ino_t> FindConnections(const std::vector<ConnectionEnd>& ends,
                                     std::map<int, sockaddr_storage>* remotes) {
  std::map<int, ino_t> found;
  if (ends.empty()) return found;
  ForEachSocket([&](int fd, ino_t inode) {
    sockaddr_storage local{}, remote{};
    socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) !=
        0) {
      return;  // listening or unconnected: not a connection
    }
    const bool has_local = getsockname(fd, reinterpret_cast<sockaddr*>(&local),
                                       &local_len) == 0;
    for (const ConnectionEnd& want : ends) {
      const bool match = want.local
                             ? (has_local && SameAddress(local, want.addr))
                             : SameAddress(remote, want.addr);
      if (match) {
        found[want.peer] = inode;
        if (remotes != nullptr) (*remotes)[want.peer] = remote;
        return;
      }
    }
  });
  return found;
}

std::set<int> ShutdownConnections(const std::map<int, ino_t>& inodes) {
  std::set<int> shut;
  if (inodes.empty()) return shut;
  std::map<ino_t, int> peer_of;
  for (const auto& [peer, inode] : inodes) peer_of[inode] = peer;
  ForEachSocket([&](int fd, ino_t inode) {
    auto it = peer_of.find(inode);
    if (it != peer_of.end() && shutdown(fd, SHUT_RDWR) == 0) {
      shut.insert(it->second);
    }
  });
  return shut;
}

}  // namespace gloo_internal
}  // namespace devmesh
