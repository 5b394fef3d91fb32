// devmesh/comm/gloo/gloo_accept_guard.h
// -----------------------------------------------------------------------------
// Keeps a peer that dies while it connects from aborting this process.
//
// Debian's Gloo (2022-05, transport/tcp/pair.cc, Pair::handleConnected)
// calls getpeername() on each connection its event loop thread accepts and
// throws gloo::EnforceNotMet when that fails. A peer that connects and then
// dies before the loop gets to the accept (SIGKILLed, its connection reset)
// leaves Linux's accept() returning the reset socket, whose getpeername()
// fails with ENOTCONN; nothing on Gloo's loop thread catches, so the process
// aborts (std::terminate), e.g. when a rank dies just after publishing its
// new group's addresses. (Upstream Gloo
// has since replaced this accept path.)
//
// devmesh therefore defines getpeername() itself (gloo_accept_guard.cc,
// linked into every binary that links //comm:gloo: alwayslink). It makes the
// system call as libc does and changes one case only: the call failed with
// ENOTCONN and came from libgloo (its first caller outside the guard's own
// object and the sanitizer runtimes, found with backtrace(), lies in a shared
// object whose file name starts with "libgloo"; GCC's ASan and TSan runtimes
// intercept getpeername() first and then call this one). Then it reports success
// with an unspecified peer address of the socket's own family (0.0.0.0:0 or
// [::]:0), so that Gloo finishes the accept, reads the socket, meets the
// reset and fails that pair with gloo::IoException ("Read error ... Connection
// reset by peer" or "Connection closed by peer"), which devmesh returns as a
// Status like any other dead peer. Every other caller and every other
// outcome is exactly the system call's.
//
// Thread-safety: getpeername() and AcceptGuardSteppedIn() may be called from
// any thread.
#ifndef DEVMESH_COMM_GLOO_GLOO_ACCEPT_GUARD_H_
#define DEVMESH_COMM_GLOO_GLOO_ACCEPT_GUARD_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>

namespace devmesh {
namespace gloo_internal {

// How many times in this process getpeername() answered a Gloo caller's
// ENOTCONN with the unspecified address (see above). For tests and logs.
int64_t AcceptGuardSteppedIn();

// Whether the return addresses callers[0..n) (innermost first; from
// backtrace()) say Gloo made the call: the first one outside the guard's own
// object and the sanitizer runtimes lies in libgloo. Exposed for getpeername() and tests.
bool CalledFromGloo(void* const* callers, int n);

// Counts one answer for AcceptGuardSteppedIn(); getpeername() calls it.
void CountSteppedIn();

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_ACCEPT_GUARD_H_
