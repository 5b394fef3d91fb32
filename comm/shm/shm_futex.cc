// devmesh/comm/shm/shm_futex.cc
#include "comm/shm/shm_futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace devmesh {
namespace shm_internal {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
               absl::Duration timeout) {
  if (timeout < absl::Microseconds(1)) timeout = absl::Microseconds(1);
  timespec ts = absl::ToTimespec(timeout);
  // FUTEX_WAIT compares *word with `expected` atomically against wakers;
  // EAGAIN (changed), EINTR and ETIMEDOUT all mean: re-check.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          &ts, nullptr, 0);
}

void FutexWake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, count,
          nullptr, nullptr, 0);
}

}  // namespace shm_internal
}  // namespace devmesh
