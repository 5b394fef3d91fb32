// devmesh/comm/shm/shm_exit_watch.cc
#include "comm/shm/shm_exit_watch.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace shm_internal {
namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture
#endif

int PidfdOpen(int64_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
}

}  // namespace

struct ExitWatch::State {
  pid_t owner = 0;  // the process this watch belongs to
  sync_internal::Mutex mu;
  int epoll_fd ABSL_GUARDED_BY(mu) = -1;  // (made with the thread)
  uint64_t next ABSL_GUARDED_BY(mu) = 1;
  struct Entry {
    int fd;
    std::function<void()> on_exit;
  };
  std::map<uint64_t, Entry> entries ABSL_GUARDED_BY(mu);

  // Runs on the watch's thread, forever (the process's exit ends it).
  void Loop(int epfd) {
    epoll_event events[64];
    while (true) {
      const int n = epoll_wait(epfd, events, 64, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // the epoll fd is gone: nothing more to watch
      }
      sync_internal::MutexLock lock(&mu);
      for (int i = 0; i < n; ++i) Fire(events[i].data.u64);
    }
  }

  // One shot: the entry is removed after its call.
  void Fire(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = entries.find(handle);
    if (it == entries.end()) return;  // unwatched meanwhile
    Entry entry = std::move(it->second);
    entries.erase(it);
    (void)epoll_ctl(epoll_fd, EPOLL_CTL_DEL, entry.fd, nullptr);
    close(entry.fd);
    entry.on_exit();
  }
};

ExitWatch::ExitWatch() : state_(new State()) { state_->owner = getpid(); }

ExitWatch& ExitWatch::Get() {
  // Never destroyed (its thread may be in epoll_wait at exit). A forked
  // child replaces its parent's copy without touching that copy's mutex,
  // which another thread of the parent may have held at the fork.
  static std::atomic<ExitWatch*> current{nullptr};
  ExitWatch* watch = current.load();
  while (watch == nullptr || watch->state_->owner != getpid()) {
    ExitWatch* made = new ExitWatch();
    if (current.compare_exchange_strong(watch, made)) return *made;
    delete made->state_;
    delete made;  // another thread won: `watch` now holds its watch
  }
  return *watch;
}

uint64_t ExitWatch::Watch(const ProcessIdentity& id,
                          std::function<void()> on_exit) {
  int fd = PidfdOpen(id.pid);
  if (fd < 0 && errno != ESRCH) return 0;  // refused: keep the slices
  // The pid may have named another process by the time it was opened:
  // checked after the open, so that only a pidfd of the member is kept.
  if (fd >= 0 && CheckLiveness(id) == Liveness::kDead) {
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    // Gone already: an eventfd that is readable at once, so that on_exit
    // still runs on the watch's thread, as for any other exit.
    fd = eventfd(1, EFD_CLOEXEC);
    if (fd < 0) return 0;
  }
  sync_internal::MutexLock lock(&state_->mu);
  if (state_->epoll_fd < 0) {
    state_->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (state_->epoll_fd < 0) {
      close(fd);
      return 0;
    }
    std::thread([s = state_, epfd = state_->epoll_fd] { s->Loop(epfd); })
        .detach();
  }
  const uint64_t handle = state_->next++;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = handle;
  if (epoll_ctl(state_->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close(fd);
    return 0;
  }
  state_->entries[handle] = State::Entry{fd, std::move(on_exit)};
  return handle;
}

void ExitWatch::Unwatch(uint64_t handle) {
  if (handle == 0) return;
  sync_internal::MutexLock lock(&state_->mu);
  auto it = state_->entries.find(handle);
  if (it == state_->entries.end()) return;
  (void)epoll_ctl(state_->epoll_fd, EPOLL_CTL_DEL, it->second.fd, nullptr);
  close(it->second.fd);
  state_->entries.erase(it);
}

int ExitWatch::watching() const {
  sync_internal::MutexLock lock(&state_->mu);
  return static_cast<int>(state_->entries.size());
}

}  // namespace shm_internal
}  // namespace devmesh
