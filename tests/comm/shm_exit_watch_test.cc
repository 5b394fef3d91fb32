// devmesh/tests/comm/shm_exit_watch_test.cc
// ExitWatch (comm/shm/shm_exit_watch.h) on real processes: a watched child's
// exit calls on_exit once; a process already gone (a zombie, a reaped pid,
// or a pid that names another process) calls it at once; Unwatch stops it.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "absl/time/clock.h"
#include "comm/shm/shm_exit_watch.h"
#include "comm/shm/shm_process.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace shm_internal {
namespace {

// A child that sends its identity, then exits when the test closes `release`.
struct Child {
  pid_t pid = -1;
  ProcessIdentity id;
  int release = -1;  // write end; closing it lets the child exit
};

Child StartChild() {
  int id_pipe[2], release_pipe[2];
  EXPECT_EQ(pipe(id_pipe), 0);
  EXPECT_EQ(pipe(release_pipe), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(id_pipe[0]);
    close(release_pipe[1]);
    auto self = SelfIdentity();
    ProcessIdentity id = self.ok() ? *self : ProcessIdentity{};
    if (write(id_pipe[1], &id, sizeof(id)) != sizeof(id)) _exit(2);
    char c;
    (void)read(release_pipe[0], &c, 1);  // EOF when the test releases it
    _exit(0);
  }
  close(id_pipe[1]);
  close(release_pipe[0]);
  Child child;
  child.pid = pid;
  child.release = release_pipe[1];
  EXPECT_EQ(read(id_pipe[0], &child.id, sizeof(child.id)),
            static_cast<ssize_t>(sizeof(child.id)));
  close(id_pipe[0]);
  EXPECT_EQ(child.id.pid, pid);
  return child;
}

struct Flag {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  void Set() {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    cv.notify_all();
  }
  // The calls so far, after waiting up to `d` for the first.
  int WaitFor(absl::Duration d) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, absl::ToChronoMilliseconds(d),
                [this] { return calls > 0; });
    return calls;
  }
};

TEST(ExitWatchTest, ExitOfAWatchedProcessCallsOnExitOnce) {
  Child child = StartChild();
  Flag flag;
  ExitWatch& watch = ExitWatch::Get();
  const int before = watch.watching();
  const uint64_t h = watch.Watch(child.id, [&flag] { flag.Set(); });
  ASSERT_NE(h, 0u) << "pidfd_open refused here";
  EXPECT_EQ(watch.watching(), before + 1);
  EXPECT_EQ(flag.WaitFor(absl::Milliseconds(100)), 0) << "fired while alive";
  close(child.release);
  EXPECT_EQ(flag.WaitFor(absl::Seconds(10)), 1);
  EXPECT_EQ(watch.watching(), before);  // one shot
  watch.Unwatch(h);                     // after firing: ignored
  int status = 0;
  EXPECT_EQ(waitpid(child.pid, &status, 0), child.pid);
  EXPECT_EQ(flag.WaitFor(absl::ZeroDuration()), 1);
}

TEST(ExitWatchTest, GoneAlreadyCallsAtOnce) {
  ExitWatch& watch = ExitWatch::Get();
  // A zombie (exited, not reaped).
  Child zombie = StartChild();
  close(zombie.release);
  while (CheckLiveness(zombie.id) != Liveness::kDead) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  Flag a;
  EXPECT_NE(watch.Watch(zombie.id, [&a] { a.Set(); }), 0u);
  EXPECT_EQ(a.WaitFor(absl::Seconds(10)), 1);
  // Reaped: the pid is free.
  int status = 0;
  ASSERT_EQ(waitpid(zombie.pid, &status, 0), zombie.pid);
  Flag b;
  EXPECT_NE(watch.Watch(zombie.id, [&b] { b.Set(); }), 0u);
  EXPECT_EQ(b.WaitFor(absl::Seconds(10)), 1);
  // A live pid (this process) with another start time: another process.
  auto self = SelfIdentity();
  ASSERT_TRUE(self.ok());
  ProcessIdentity other = *self;
  other.start_time += 1;
  Flag c;
  EXPECT_NE(watch.Watch(other, [&c] { c.Set(); }), 0u);
  EXPECT_EQ(c.WaitFor(absl::Seconds(10)), 1);
}

TEST(ExitWatchTest, UnwatchStopsIt) {
  ExitWatch& watch = ExitWatch::Get();
  const int before = watch.watching();
  Child child = StartChild();
  Flag flag;
  const uint64_t h = watch.Watch(child.id, [&flag] { flag.Set(); });
  ASSERT_NE(h, 0u);
  watch.Unwatch(h);
  EXPECT_EQ(watch.watching(), before);
  close(child.release);
  int status = 0;
  EXPECT_EQ(waitpid(child.pid, &status, 0), child.pid);
  EXPECT_EQ(flag.WaitFor(absl::Milliseconds(300)), 0);
  // A watch of the same (now reaped) identity still fires: the watch works.
  Flag again;
  EXPECT_NE(watch.Watch(child.id, [&again] { again.Set(); }), 0u);
  EXPECT_EQ(again.WaitFor(absl::Seconds(10)), 1);
}

}  // namespace
}  // namespace shm_internal
}  // namespace devmesh
