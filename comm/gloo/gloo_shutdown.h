// devmesh/comm/gloo/gloo_shutdown.h
// -----------------------------------------------------------------------------
// Ending a Gloo group's connections so that Gloo itself wakes every wait on
// them. Debian's Gloo (2022-05) has no abort for its own algorithms'
// buffers, and Pair::close() changes a pair's state without telling the
// buffers waiting on it: a collective blocked in another thread then waits
// for its whole timeout. A socket shut down under Gloo, by contrast, reads
// as "connection closed" on Gloo's event-loop thread, which calls
// Pair::signalException: every buffer registered on the pair and every
// pending unbound send and receive fails at once. The peers' ends see the
// same, so they fail at once too instead of at their timeout. (Unbound
// sends already queued for writing are not signalled by that Gloo version;
// those still end at the timeout.)
//
// Gloo keeps a pair's socket private, so the group remembers at creation
// which socket addresses identify each connection: for a pair this side
// accepted, the local address is the pair's own listening address (Debian's
// Gloo listens once per pair); for a pair this side connected, the remote
// address is the peer's listening address for it.
#ifndef DEVMESH_COMM_GLOO_GLOO_SHUTDOWN_H_
#define DEVMESH_COMM_GLOO_GLOO_SHUTDOWN_H_

#include <sys/socket.h>

#include <vector>

namespace devmesh {
namespace gloo_internal {

// One connection of a group, by one of its socket addresses.
struct ConnectionEnd {
  bool local = false;  // true: match getsockname; false: match getpeername
  sockaddr_storage addr{};
};

// shutdown(2)s (SHUT_RDWR) every socket of this process whose local or
// remote address (as each end says) equals one of `ends` (family, address
// and port). Returns how many it shut down. Reads /proc/self/fd; a socket
// that closes meanwhile is skipped. Thread-safe; never blocks.
int ShutdownConnections(const std::vector<ConnectionEnd>& ends);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_SHUTDOWN_H_
