// devmesh/sync/annotated_mutex.h
// -----------------------------------------------------------------------------
// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// the capability attributes of absl/base/thread_annotations.h, so that
// clang's -Wthread-safety checks the members marked ABSL_GUARDED_BY them
// (libstdc++'s std::mutex carries no attributes; docs/thread_safety.md).
// Internal to devmesh (//sync:annotated_mutex).
//
// Why not absl::Mutex: Debian's Abseil is a prebuilt library without TSan
// instrumentation, so TSan sees none of absl::Mutex's happens-before edges
// and reports races that are not there; these wrap pthread primitives,
// which TSan intercepts. The names and signatures are absl::Mutex's, so
// that code moves to it by changing the namespace.
//
// Semantics are std::mutex's and std::condition_variable's: not recursive;
// a wait may wake spuriously, so callers wait in a loop on their condition.
//
// Thread-safety: as the std types they wrap.
#ifndef DEVMESH_SYNC_ANNOTATED_MUTEX_H_
#define DEVMESH_SYNC_ANNOTATED_MUTEX_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace devmesh {
namespace sync_internal {

class CondVar;

// An exclusive lock (std::mutex).
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Locks when free and returns true; else returns false at once.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable (std::condition_variable) for a Mutex. Each wait
// releases `mu` and holds it again when it returns.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // True when `deadline` passed (std::condition_variable::wait_until on the
  // system clock, as absl::ToChronoTime).
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitUntil(mu, absl::ToChronoTime(deadline));
  }
  // True when `timeout` passed (std::condition_variable::wait_for: the
  // steady clock). A finite timeout only: the chrono form of
  // absl::InfiniteDuration() overflows.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout)) ==
        std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  template <typename TimePoint>
  bool WaitUntil(Mutex* mu, TimePoint deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }

  std::condition_variable cv_;
};

}  // namespace sync_internal
}  // namespace devmesh

#endif  // DEVMESH_SYNC_ANNOTATED_MUTEX_H_
