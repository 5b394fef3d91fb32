// devmesh/comm/gloo/gloo_shutdown.h
// -----------------------------------------------------------------------------
// Ending a Gloo group's connections so that Gloo itself wakes every wait on
// them. Debian's Gloo (2022-05) has no abort for its own algorithms'
// buffers, and Pair::close() changes a pair's state without telling the
// buffers waiting on it: a collective blocked in another thread then waits
// for its whole timeout. A socket shut down under Gloo, by contrast, reads
// as "connection closed" on Gloo's event-loop thread, which calls
// Pair::signalException: every buffer registered on the pair and every
// pending unbound send and receive fails at once, and the loop closes the
// pair. The peers' ends see the same. (A message Gloo is halfway through
// reading, or an unbound send it already queued for writing, is not
// signalled by that Gloo version; Abort closes every pair, which waits for
// Gloo's loop to leave it, and then wakes those through the group's
// AbortableContext, gloo_abortable_context.h.)
//
// Gloo keeps a pair's socket private, so the group finds its sockets once,
// right after creation (FindConnections: the sockets whose local or remote
// address is one of the pairs' listening addresses, Debian's Gloo listening
// once per pair), and remembers each by its inode, which no other socket
// has while it is open. Abort then acts on a duplicate of each descriptor
// whose socket has a remembered inode, so a descriptor closed and reused
// meanwhile is never touched.
#ifndef DEVMESH_COMM_GLOO_GLOO_SHUTDOWN_H_
#define DEVMESH_COMM_GLOO_GLOO_SHUTDOWN_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <map>
#include <set>
#include <vector>

namespace devmesh {
namespace gloo_internal {

// One connection of a group, by one of its socket addresses, and the group
// rank of the peer at its other end.
struct ConnectionEnd {
  bool local = false;  // true: match getsockname; false: match getpeername
  sockaddr_storage addr{};
  int peer = -1;
};

// The inodes of this process's connected sockets that match `ends`, per
// peer group rank. Reads /proc/self/fd; call right after the group's
// creation barrier, while every pair is connected. `remotes` (may be null)
// gets the remote address of each connection found, per peer group rank.
// Thread-safe.
std::map<int, ino_t> FindConnections(
    const std::vector<ConnectionEnd>& ends,
    std::map<int, sockaddr_storage>* remotes = nullptr);

// shutdown(2)s (SHUT_RDWR), through a duplicate descriptor, every socket of
// this process whose inode is one of `inodes`' values; returns the peers
// whose socket it found. Thread-safe; never blocks.
std::set<int> ShutdownConnections(const std::map<int, ino_t>& inodes);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_SHUTDOWN_H_
