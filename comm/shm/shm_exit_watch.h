// devmesh/comm/shm/shm_exit_watch.h
// -----------------------------------------------------------------------------
// Tells a shared-memory group the moment a member's process exits, instead
// of at its waiters' next liveness slice (kLivenessSlice, 50 ms): one thread
// per process blocks in epoll_wait, with no timeout, on a pidfd per watched
// member (pidfd_open, Linux 5.3: readable once the process has exited, a
// zombie included, and never another process's, whatever pids are reused).
// An idle watch costs no CPU (no tick). Where pidfd_open is refused (an
// older kernel, a seccomp filter) Watch returns 0 and the group keeps its
// slices. Internal to the shm backend. What it saved: docs/design_figures.md.
//
// Thread-safety: every method from any thread. fork(): a child process gets
// a watch of its own on first use (the parent's thread does not exist there).
#ifndef DEVMESH_COMM_SHM_SHM_EXIT_WATCH_H_
#define DEVMESH_COMM_SHM_SHM_EXIT_WATCH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <functional>

#include "comm/shm/shm_process.h"

namespace devmesh {
namespace shm_internal {

class ExitWatch {
 public:
  // This process's watch (made on first use).
  static ExitWatch& Get();

  // Calls `on_exit` once, on the watch's thread, when process `id` has
  // exited; at once (on that thread) when it already has, or when its pid
  // names another process by now. `on_exit` must be quick and must not call
  // Watch or Unwatch. Returns the registration (never 0), or 0 when the
  // process cannot be watched (pidfd_open refused): `on_exit` is then never
  // called.
  uint64_t Watch(const ProcessIdentity& id, std::function<void()> on_exit);

  // Ends registration `handle` (0 and unknown handles are ignored). When it
  // returns, that registration's `on_exit` is not running and never will.
  void Unwatch(uint64_t handle);

  // Registrations now (tests).
  int watching() const;

  struct State;  // shm_exit_watch.cc

 private:
  ExitWatch();
  State* state_;
};

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_EXIT_WATCH_H_
