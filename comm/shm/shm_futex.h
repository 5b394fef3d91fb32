// devmesh/comm/shm/shm_futex.h
// -----------------------------------------------------------------------------
// The wait/wake primitive of the shared-memory backend: Linux futexes on a
// 32-bit word in a MAP_SHARED segment (not FUTEX_PRIVATE_FLAG, so that the
// kernel matches waiters of every process that maps the page).
//
// A waiter sleeps in the kernel instead of spinning: with four ranks on two
// cores (the benchmark's case) a spinning rank would take the core from the
// peer it waits for. Callers bound every wait (comm/shm/shm_sync.h loops in
// slices, checking the members' liveness between them).
//
// Thread-safety: both functions may be called from any thread of any process
// that maps the word.
#ifndef DEVMESH_COMM_SHM_SHM_FUTEX_H_
#define DEVMESH_COMM_SHM_SHM_FUTEX_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace devmesh {
namespace shm_internal {

// Sleeps while *word == expected, for at most `timeout` (rounded up to 1 us).
// Returns at once when *word != expected on entry; may return early
// (spuriously, on a signal, or woken); callers re-check their condition.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout);

// Wakes up to `count` waiters on `word` (INT32_MAX: all).
void FutexWake(std::atomic<uint32_t>* word, int count);

// The CPU's spin-wait hint (x86 pause); a no-op elsewhere.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_FUTEX_H_
