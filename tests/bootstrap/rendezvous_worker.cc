// A rank of the launcher and rendezvous tests: joins the job from the
// environment (Bootstrap::FromEnv), sets its key, reads every rank's key, and
// exits 0 when all are right. With WORKER_FAIL_RANK=r, rank r exits 3 right
// after joining; the others then block in a Get that only a kill ends. With
// WORKER_KILL_RANK0=1, rank 0 SIGKILLs itself once the others have joined
// (counted at key "joined"); the others wait until it is gone, then write a key
// each and read every other survivor's (exit 0 when all of that worked, 1
// otherwise). WORKER_TIMEOUT_S sets the bootstrap (and store) timeout, 60 s by
// default. With WORKER_EXIT_BEFORE_RANK=r, rank r (by RANK) exits 3 before it
// joins.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/bootstrap.h"

int main() {
  devmesh::BootstrapOptions options;
  options.timeout = absl::Seconds(60);
  if (const char* t = std::getenv("WORKER_TIMEOUT_S")) {  // for quick failures
    options.timeout = absl::Seconds(std::atoi(t));
  }
  const char* early = std::getenv("WORKER_EXIT_BEFORE_RANK");
  const char* rank_text = std::getenv("RANK");
  if (early != nullptr && rank_text != nullptr &&
      std::atoi(early) == std::atoi(rank_text)) {
    return 3;
  }
  auto boot = devmesh::Bootstrap::FromEnv(options);
  if (!boot.ok()) {
    std::fprintf(stderr, "bootstrap failed: %s\n", boot.status().ToString().c_str());
    return 1;
  }
  devmesh::Bootstrap& b = **boot;
  if (std::getenv("WORKER_KILL_RANK0") != nullptr) {
    // Rank 0 dies only once every other rank is past the rendezvous (so
    // that rank 0's death is the job's first failure).
    if (b.rank() == 0) {
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (absl::Now() < deadline) {
        auto joined = b.store()->Add("joined", 0);
        if (joined.ok() && *joined == b.world_size() - 1) raise(SIGKILL);
        absl::SleepFor(absl::Milliseconds(5));
      }
      return 6;
    }
    if (!b.store()->Add("joined", 1).ok()) return 7;
    const pid_t rank0 = static_cast<pid_t>(b.peers()[0].pid);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!(kill(rank0, 0) != 0 && errno == ESRCH)) {  // reaped: gone
      if (absl::Now() > deadline) return 5;
      absl::SleepFor(absl::Milliseconds(10));
    }
    auto store = b.store();
    absl::Status set =
        store->Set(absl::StrCat("after/", b.rank()), absl::StrCat("alive", b.rank()));
    if (!set.ok()) {
      std::fprintf(stderr, "rank %d: set after rank 0 died: %s\n", b.rank(),
                   set.ToString().c_str());
      return 1;
    }
    for (int r = 1; r < b.world_size(); ++r) {
      auto v = store->Get(absl::StrCat("after/", r), absl::Seconds(30));
      if (!v.ok() || *v != absl::StrCat("alive", r)) {
        std::fprintf(stderr, "rank %d: get after rank 0 died: %s\n", b.rank(),
                     v.ok() ? v->c_str() : v.status().ToString().c_str());
        return 1;
      }
    }
    std::printf("rank %d read the keys of ranks 1..%d after rank 0 died\n",
                b.rank(), b.world_size() - 1);
    return 0;
  }
  const char* fail = std::getenv("WORKER_FAIL_RANK");
  if (fail != nullptr && std::atoi(fail) == b.rank()) {
    std::printf("failing on purpose\n");
    return 3;
  }
  if (fail != nullptr) {
    (void)b.store()->Get("never-set", absl::Hours(1));
    return 4;
  }
  auto store = b.store();
  if (absl::Status s = store->Set(absl::StrCat("rank/", b.rank()),
                                  absl::StrCat("v", b.rank()));
      !s.ok()) {
    std::fprintf(stderr, "set failed: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int r = 0; r < b.world_size(); ++r) {
    auto v = store->Get(absl::StrCat("rank/", r));
    if (!v.ok() || *v != absl::StrCat("v", r)) {
      std::fprintf(stderr, "rank %d: bad key of rank %d: %s\n", b.rank(), r,
                   v.ok() ? v->c_str() : v.status().ToString().c_str());
      return 1;
    }
  }
  std::printf("rank %d of %d read all %d keys\n", b.rank(), b.world_size(), b.world_size());
  return 0;
}
