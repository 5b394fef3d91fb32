// DeviceMesh::Shrink with real processes and real faults (issue 20): the
// worked example (examples/elastic) trains a (dp=3, tp=2) mesh over 6
// processes on Gloo, started by the test (no launcher that stops the
// others), while a fault is injected at step kFaultStep:
//   kill_between_steps   rank 2 SIGKILLs itself before the step's first call
//   kill_mid_dp          rank 2 is SIGKILLed by its own thread 2 ms into the
//                        dp all-reduce
//   kill_mid_tp          the same in the tp all-reduce
//   kill_replica         ranks 2 and 3 (all of replica 1) are SIGKILLed at
//                        once (rank 2 kills 3, then itself)
//   kill_lowest          rank 0 SIGKILLs itself
//   second_kill          rank 2 dies, then rank 4 dies as it enters Shrink
//   kill_in_rebuild      rank 2 dies, then rank 4 dies in Shrink's rebuild,
//                        as it publishes its first new group's addresses
//                        (after the agreement counted it a survivor): its
//                        peers, waiting for those addresses, must leave the
//                        creation on the watch's verdict (a second round),
//                        not at the group timeout (120 s here, past the run's
//                        60 s limit)
//   kill_in_connect      the same, but rank 4 dies just after it published
//                        those addresses: the peers whose side of a pair
//                        waits for rank 4 to connect sit in Gloo's connect,
//                        not in a store wait, and must leave it on the
//                        verdict too (CommOptions::creation_cancel)
//   kill_in_rebuild_other_host  kill_in_rebuild with rank 4 seen as on
//                        another host: its published process identity names
//                        another PID namespace, so no survivor's /proc can
//                        judge it; its liveness beacon (a port its process
//                        holds open, reached over loopback here as another
//                        host's is over that host's address) or its lease
//                        decide. Every survivor must be back
//                        within max(2 s, 2 lease periods) of rank 4's kill
//                        (DEVMESH_LEASE_PERIOD_MS; 2 s at the default
//                        250 ms), over etcd too, whose lease alone takes its
//                        TTL (2 s at least) and up to 0.5 s more; the figure
//                        printed is "second kill to the last survivor
//                        resumed"
//   stop_long            rank 2 is SIGSTOPped for 4 s (> the 2 s silence)
//                        and continued: it must be fenced (FailedPrecondition
//                        from every call), the others go on without it
//   stop_short           rank 2 is SIGSTOPped for 0.4 s: no shrink at all
//   kill_in_shrink_at_Nms  rank 2 dies, then rank 4 SIGKILLs itself N ms
//                        after it entered Shrink, N = 0..20 in 1 ms steps:
//                        the second death lands in the agreement, the
//                        rebuild's store exchange, a connect, or just after
//                        the Shrink (a second recovery); with a group timeout
//                        past the run's limit, every survivor's wait must end
//                        on the verdict and the next round agree (survivors
//                        end at epoch 1 or 2, after 1 or 2 recoveries),
//                        every survivor back within max(2 s, 2 lease
//                        periods) of rank 4's kill, as above
//   kill_while_computing rank 2 dies while rank 0 computes for 40 s (twice
//                        the Shrink timeout): rank 0 must hear of the death
//                        while computing (DeviceMesh::OnFailure), stop and
//                        join the others' Shrink
//   control              no fault: no shrink
//   below_min_replicas   rank 2 dies with min_replicas 3: every live rank's
//                        Shrink refuses, with the same text
//   no_majority          ranks 0-2 die: 3 of 6 is not a majority, refused
// Each run checks: every survivor's final parameters equal a fresh run with
// the replicas the survivors resumed with (bit for bit), every survivor
// resumed at the same step, at most 1 step lost, the dead and removed ranks
// are the expected ones, removed live ranks were told FailedPrecondition,
// no process hangs (RunRanks' 60 s limit), no false shrink, and no child
// process is left after the run. It prints
// the recovery time (fault to the first collective of the new epoch done on
// every survivor) split into detect (fault to the first verdict), agree and
// rebuild, with p50 / p95 / max per scenario. --shrink_runs sets the runs
// per scenario (CI: 2; the closing note's long mode: 30). --store=etcd runs
// the job over a 1-member etcd that the test starts (the failure watch on
// etcd leases; run it alone: free ports); DEVMESH_LEASE_PERIOD_MS (e.g.
// --test_env=DEVMESH_LEASE_PERIOD_MS=1000) sets the lease period, and with
// it the bound.
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/failure_watch.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "examples/elastic/elastic_training.h"
#include "gtest/gtest.h"
#include "store/forwarding_store.h"
#include "store/store.h"
#include "tests/device_mesh/mesh_checks.h"
#include "tests/store/etcd_testing.h"

ABSL_FLAG(int, shrink_runs, 2, "launches per scenario");
ABSL_FLAG(std::string, backend, "gloo",
          "every group's backend (gloo or ucx: the CPU backends across "
          "hosts)");
ABSL_FLAG(std::string, store, "tcp",
          "the job's store: tcp (the test's //store server) or etcd (a "
          "1-member etcd started by the test)");

namespace devmesh {
namespace {

using ::devmesh::elastic_example::Point;
using ::devmesh::elastic_example::Reference;
using ::devmesh::elastic_example::TrainOptions;
using ::devmesh::elastic_example::TrainResult;
using ::devmesh::testing::Expect;
using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;

constexpr int kRanks = 6;
constexpr int64_t kSteps = 24;
constexpr int64_t kFaultStep = 10;

enum class Fault {
  kNone,
  kKillBetweenSteps,
  kKillMidDp,
  kKillMidTp,
  kStop,
};

struct Scenario {
  std::string name;
  Fault fault = Fault::kNone;
  std::vector<int> victims;     // ranks the fault hits at kFaultStep
  int second_victim = -1;       // dies as it enters Shrink
  absl::Duration stop;          // for kStop
  // Expected:
  std::vector<int> dead;        // found dead by Shrink
  std::vector<int> removed;     // live ranks of removed replicas
  std::vector<int> fenced;      // ranks that must be fenced
  int64_t replicas = 3;         // at the end
  // Groups each survivor keeps (-1: any; which groups were idle when the
  // verdict came is left to timing after a kill). Whatever is kept, every
  // member of a group decides alike (checked always).
  int kept = -1;
  // Shrink refuses: every live rank gets FailedPrecondition containing
  // this, the same text on all.
  int64_t min_replicas = 1;
  std::string refused;
  int rounds = -1;  // Shrink's rounds on every survivor (-1: any)
  int rebuild_victim = -1;  // dies in Shrink's rebuild (kill_in_rebuild)
  // It dies just after its first group MultiSet returns (kill_in_connect),
  // not as it makes it.
  bool rebuild_after_publish = false;
  // The rebuild victim's process looks as if on another host (its
  // FailureWatch::ProcKey value names another PID namespace): no /proc
  // here can tell that it died, only its beacon or its lease. Every
  // survivor must resume within `resume_bound` of its kill.
  bool rebuild_victim_remote = false;
  absl::Duration resume_bound = absl::InfiniteDuration();
  // The epoch survivors end at (after a fault). A death in the rebuild is a
  // second round of the Shrink of a rank whose rebuild waited on the dead
  // rank, and a second Shrink of the same recovery for one whose rebuild did
  // not (its agreement on the step meets the new verdict): epoch 2 either
  // way, 2 rounds over the recovery's Shrinks.
  int64_t epoch = 1;
  // This rank computes for `compute` at kFaultStep (TrainOptions::compute):
  // longer than the Shrink timeout, so only hearing of the death while
  // computing (DeviceMesh::OnFailure) lets it join the others' Shrink.
  int computer = -1;
  absl::Duration compute;
  // This rank SIGKILLs itself `timed_after` after it entered its first
  // Shrink (kill_in_shrink_at_*); the survivors may then end at epoch 1 or 2
  // after 1 or 2 recoveries (the death fell in the Shrink or after it).
  int timed_victim = -1;
  absl::Duration timed_after;
};

// The lease period the ranks run with (DEVMESH_LEASE_PERIOD_MS, else the
// default for 6 ranks, 250 ms), and the bound every survivor's wait on a
// death must end within: max(2 s, 2 periods).
absl::Duration LeasePeriod() {
  int64_t ms = 250;
  const char* env = std::getenv("DEVMESH_LEASE_PERIOD_MS");
  if (env != nullptr) (void)absl::SimpleAtoi(env, &ms);
  return absl::Milliseconds(ms);
}
absl::Duration DeathBound() {
  return std::max(absl::Seconds(2), 2 * LeasePeriod());
}

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> s;
  s.push_back({"kill_between_steps", Fault::kKillBetweenSteps, {2}, -1, {},
               {2}, {3}, {}, 2});
  s.push_back({"kill_mid_dp", Fault::kKillMidDp, {2}, -1, {}, {2}, {3}, {}, 2});
  s.push_back({"kill_mid_tp", Fault::kKillMidTp, {2}, -1, {}, {2}, {3}, {}, 2});
  s.push_back({"kill_replica", Fault::kKillBetweenSteps, {2, 3}, -1, {},
               {2, 3}, {}, {}, 2});
  s.push_back({"kill_lowest", Fault::kKillBetweenSteps, {0}, -1, {}, {0}, {1},
               {}, 2});
  s.push_back({"second_kill", Fault::kKillBetweenSteps, {2}, 4, {}, {2, 4},
               {3, 5}, {}, 1});
  {
    Scenario k{"kill_in_rebuild", Fault::kKillBetweenSteps, {2}, -1, {},
               {2, 4}, {3, 5}, {}, 1};
    k.rebuild_victim = 4;
    k.rounds = 2;  // over the recovery's Shrinks: one epoch each
    k.epoch = 2;
    s.push_back(k);
    k.name = "kill_in_connect";
    k.rebuild_after_publish = true;
    s.push_back(k);
    k.name = "kill_in_rebuild_other_host";
    k.rebuild_after_publish = false;
    k.rebuild_victim_remote = true;
    k.resume_bound = DeathBound();
    s.push_back(k);
  }
  // Found dead 2 s after it stopped: by then every tp group of a surviving
  // replica is idle and whole, so each is kept; the dp groups are rebuilt.
  s.push_back({"stop_long", Fault::kStop, {2}, -1, absl::Seconds(4), {2}, {3},
               {2}, 2, 1});
  s.push_back({"stop_short", Fault::kStop, {2}, -1, absl::Milliseconds(400),
               {}, {}, {}, 3});
  {
    Scenario k{"kill_while_computing",
               Fault::kKillBetweenSteps,
               {2},
               -1,
               {},
               {2},
               {3},
               {},
               2};
    k.computer = 0;
    k.compute = absl::Seconds(40);
    s.push_back(k);
  }
  for (int ms = 0; ms <= 20; ++ms) {
    Scenario k{absl::StrCat("kill_in_shrink_at_", ms, "ms"),
               Fault::kKillBetweenSteps, {2}, -1, {}, {2, 4}, {3, 5}, {}, 1};
    k.timed_victim = 4;
    k.timed_after = absl::Milliseconds(ms);
    k.resume_bound = DeathBound();
    k.epoch = -1;  // 1 or 2
    s.push_back(k);
  }
  s.push_back({"control", Fault::kNone, {}, -1, {}, {}, {}, {}, 3});
  // Refusals, the same on every live rank: fewer replicas than asked for;
  // not more than half of the ranks alive (ranks 0-2 die, 3 of 6 remain).
  s.push_back({"below_min_replicas", Fault::kKillBetweenSteps, {2}, -1, {},
               {2}, {}, {}, 3, -1, 3,
               "would leave 2 of 3 replicas along mesh dim dp (dead: [2]), "
               "below min_replicas 3"});
  s.push_back({"no_majority", Fault::kKillBetweenSteps, {0, 1, 2}, -1, {},
               {0, 1, 2}, {}, {}, 3, -1, 1,
               "only 3 of 6 ranks are alive (dead: [0, 1, 2]); going on "
               "needs more than half (no split brain)"});
  return s;
}

std::string ReadFile(const std::string& path);

// The etcd the runs share with --store=etcd (started at the first run;
// each run under a prefix of its own), else nullptr.
::devmesh::testing::EtcdCluster* Etcd() {
  static ::devmesh::testing::EtcdCluster* etcd = [] {
    ::devmesh::testing::EtcdCluster* e = nullptr;
    if (absl::GetFlag(FLAGS_store) == "etcd") {
      e = new ::devmesh::testing::EtcdCluster();
      absl::Status started = e->Start(1);
      if (!started.ok()) {
        std::fprintf(stderr, "etcd did not start: %s\n",
                     started.ToString().c_str());
        std::abort();
      }
    }
    return e;
  }();
  return etcd;
}

// This process's children other than `except` (the etcd member), read from
// /proc: none must be left after a run.
std::vector<int> ChildrenBut(int except) {
  std::vector<int> out;
  const std::string tasks = absl::StrCat("/proc/", getpid(), "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return out;
  while (struct dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string children =
        ReadFile(absl::StrCat(tasks, "/", e->d_name, "/children"));
    for (absl::string_view w :
         absl::StrSplit(children, ' ', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(w, &pid) && pid != except) out.push_back(pid);
    }
  }
  closedir(dir);
  return out;
}

bool Has(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Dir(const std::string& run) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/shrink_", run);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether /proc shows process `pid` stopped (state T).
bool IsStopped(int pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() &&
         stat[close + 2] == 'T';
}

void RecordFault(const std::string& dir) {
  WriteFile(absl::StrCat(dir, "/fault_ns"),
            absl::StrCat(absl::GetCurrentTimeNanos()));
}

// Stops this process for `d`: a child sends SIGCONT after `d` and exits;
// this process reaps it after it continues.
void StopFor(absl::Duration d) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    struct timespec ts = absl::ToTimespec(d);
    while (nanosleep(&ts, &ts) != 0) {
    }
    kill(parent, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  int status = 0;
  waitpid(child, &status, 0);
}

int64_t Ns(absl::Time t) {
  return t == absl::InfinitePast() ? 0 : absl::ToUnixNanos(t);
}

// The bootstrap's store, through which this process SIGKILLs itself at its
// first MultiSet of a group key (Gloo's) or Set of a UCX group's address
// once `armed` (kill_in_rebuild: Shrink's
// rebuild publishing a new group's addresses; the agreement before it sets
// only epoch keys, and kept groups touch no key).
class DieAtGroupPublishStore : public ForwardingStore {
 public:
  // `remote_proc_key`, when not empty, is this rank's FailureWatch::ProcKey:
  // its value is published with another PID namespace (a process that
  // /proc here cannot see; its beacon, in the same value, is reached over
  // loopback). `stamp`: the file the kill's time is written to.
  DieAtGroupPublishStore(std::shared_ptr<Store> base,
                         std::shared_ptr<std::atomic<bool>> armed,
                         bool after_publish, std::string remote_proc_key,
                         std::string stamp)
      : ForwardingStore(std::move(base)), armed_(std::move(armed)),
        after_publish_(after_publish),
        remote_proc_key_(std::move(remote_proc_key)),
        stamp_(std::move(stamp)) {}
  // A UCX group publishes its address with one Set ("<group>/ucx/<rank>").
  absl::Status Set(absl::string_view k, absl::string_view v) override {
    if (!remote_proc_key_.empty() && k == remote_proc_key_) {
      // "<boot id>|<pid namespace>|<pid>|<start>[|<beacon>]": another PID
      // namespace's.
      std::vector<std::string> f = absl::StrSplit(v, '|');
      if (f.size() >= 2) f[1] = "4026531999999";
      return base()->Set(k, absl::StrJoin(f, "|"));
    }
    const bool fire = armed_->load() &&
                      absl::StartsWith(k, "devmesh/group/") &&
                      absl::StrContains(k, "/ucx/");
    if (fire && !after_publish_) Die();
    absl::Status s = base()->Set(k, v);
    if (fire) Die();
    return s;
  }
  absl::Status MultiSet(absl::Span<const std::string> k,
                        absl::Span<const std::string> v) override {
    const bool fire = armed_->load() && !k.empty() &&
                      absl::StartsWith(k[0], "devmesh/group/");
    if (fire && !after_publish_) Die();
    absl::Status s = base()->MultiSet(k, v);
    if (fire) Die();
    return s;
  }

 private:
  void Die() {
    WriteFile(stamp_, absl::StrCat(absl::GetCurrentTimeNanos()));
    raise(SIGKILL);
  }

  std::shared_ptr<std::atomic<bool>> armed_;
  const bool after_publish_;
  const std::string remote_proc_key_;
  const std::string stamp_;
};

absl::Status Body(Bootstrap& b, const Scenario& sc, const std::string& dir) {
  const int me = b.rank();
  auto armed = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<Store> store = b.store();
  if (me == sc.rebuild_victim) {
    store = std::make_shared<DieAtGroupPublishStore>(
        store, armed, sc.rebuild_after_publish,
        sc.rebuild_victim_remote ? FailureWatch::ProcKey(me) : "",
        absl::StrCat(dir, "/rebuild_fault_ns"));
  }
  ASSIGN_OR_RETURN(runtime, MeshRuntime::Create(store, me, b.world_size(),
                                                b.local_rank()));
  MeshOptions options;
  options.all.backend = absl::GetFlag(FLAGS_backend);
  // A hang shows as a failure; kill_in_rebuild's is past the run's limit, so
  // that only the watch's verdict can end its peers' wait.
  options.all.timeout = absl::Seconds(
      sc.rebuild_victim >= 0 || sc.timed_victim >= 0 ? 120 : 30);
  ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {3, 2}, {"dp", "tp"},
                                        options));
  TrainOptions train;
  train.steps = kSteps;
  train.shrink.timeout = absl::Seconds(20);
  train.shrink.min_replicas = sc.min_replicas;
  if (me == sc.computer) {
    // Once: the step is run again after the Shrink, without the long phase.
    auto first = std::make_shared<bool>(true);
    train.compute = [&sc, first](int64_t step) {
      if (step != kFaultStep || !*first) return absl::ZeroDuration();
      *first = false;
      return sc.compute;
    };
  }
  const bool victim = Has(sc.victims, me);
  WriteFile(absl::StrCat(dir, "/pid_", me), absl::StrCat(getpid()));
  auto hook = [&](Point p, int64_t step, int64_t epoch) {
    if (epoch != 0) return;
    if (p == Point::kShrinkStart && me == sc.second_victim) {
      raise(SIGKILL);
    }
    if (p == Point::kShrinkStart && me == sc.rebuild_victim) armed->store(true);
    if (p == Point::kShrinkStart && me == sc.timed_victim) {
      std::thread([after = sc.timed_after, dir] {
        absl::SleepFor(after);
        WriteFile(absl::StrCat(dir, "/rebuild_fault_ns"),
                  absl::StrCat(absl::GetCurrentTimeNanos()));
        raise(SIGKILL);
      }).detach();
    }
    if (!victim || step != kFaultStep) return;
    switch (sc.fault) {
      case Fault::kKillBetweenSteps:
        // Several victims die at once: the first stops the others (no one
        // has died yet, so no one can hear of a death), waits until the
        // kernel shows them stopped, then kills them and itself. (Killing
        // them one by one let a later victim, while this process waited for
        // a core, hear of the first death and arrive in Shrink before its
        // own kill: a survivor of the next epoch.)
        if (p == Point::kBeforeShardAllReduce && me == sc.victims[0]) {
          std::vector<int> pids;
          for (int other : sc.victims) {
            if (other == me) continue;
            int pid = 0;
            if (absl::SimpleAtoi(ReadFile(absl::StrCat(dir, "/pid_", other)),
                                 &pid) &&
                pid > 0) {
              kill(pid, SIGSTOP);
              pids.push_back(pid);
            }
          }
          for (int pid : pids) {
            const absl::Time end = absl::Now() + absl::Seconds(2);
            while (absl::Now() < end && !IsStopped(pid)) {
              absl::SleepFor(absl::Microseconds(100));
            }
          }
          for (int pid : pids) kill(pid, SIGKILL);
          RecordFault(dir);
          raise(SIGKILL);
        }
        break;
      case Fault::kKillMidDp:
      case Fault::kKillMidTp:
        if (p == (sc.fault == Fault::kKillMidDp ? Point::kBeforeReplicaAllReduce
                                                : Point::kBeforeShardAllReduce)) {
          std::thread([dir] {
            absl::SleepFor(absl::Milliseconds(2));
            RecordFault(dir);
            raise(SIGKILL);
          }).detach();
        }
        break;
      case Fault::kStop:
        if (p == Point::kBeforeShardAllReduce) {
          RecordFault(dir);
          StopFor(sc.stop);
        }
        break;
      case Fault::kNone:
        break;
    }
  };
  ASSIGN_OR_RETURN(result, elastic_example::Train(mesh, train, hook));
  if (me == sc.computer) {
    // It stopped computing on the verdict, well before its compute's end.
    RETURN_IF_ERROR(Expect(
        result.recoveries.size() == 1 &&
            absl::StrContains(result.recoveries[0].error,
                              "UNAVAILABLE: stopped computing step 10: "
                              "global rank 2 died"),
        absl::StrCat(
            "the computing rank's recoveries: ",
            result.recoveries.empty() ? "none" : result.recoveries[0].error)));
  }

  std::string line = absl::StrCat("rank=", me, " steps=", result.steps,
                                   " epoch=", result.epoch, " left=",
                                   result.left_because.empty() ? 0 : 1);
  if (!sc.refused.empty()) {
    RETURN_IF_ERROR(Expect(
        absl::StrContains(result.left_because, sc.refused),
        absl::StrCat("rank ", me, ": Shrink said '", result.left_because,
                     "', want '", sc.refused, "'")));
    WriteFile(absl::StrCat(dir, "/", me),
              absl::StrCat(line, " refused=", result.left_because));
    return absl::OkStatus();
  }
  if (Has(sc.fenced, me)) {
    // Fenced: the failed call and every later one is FailedPrecondition.
    RETURN_IF_ERROR(Expect(
        absl::StartsWith(result.last_error, "FAILED_PRECONDITION") &&
            absl::StrContains(result.last_error, "fenced"),
        absl::StrCat("fenced rank's failed call: ", result.last_error)));
    RETURN_IF_ERROR(Expect(absl::StrContains(result.left_because, "fenced"),
                           absl::StrCat("fenced rank's Shrink: ",
                                        result.left_because)));
    // The same facts as payloads (comm/error_info.h), no text read.
    RETURN_IF_ERROR(Expect(result.last_error_info.fenced &&
                               result.left_info.fenced &&
                               result.left_info.removed_in_epoch == -1,
                           "fenced rank's errors lack kFencedPayload"));
    for (const char* dim : {"dp", "tp"}) {
      ASSIGN_OR_RETURN(group, mesh.GetGroup(dim));
      float x = 1;
      absl::Status again = group->AllReduce(&x, &x, 1, DataType::kFloat32,
                                            ReduceOp::kSum);
      RETURN_IF_ERROR(Expect(absl::IsFailedPrecondition(again),
                             absl::StrCat("fenced rank's later call on ", dim,
                                          ": ", again.ToString())));
      RETURN_IF_ERROR(Expect(absl::IsFailedPrecondition(group->Barrier()),
                             "fenced rank's Barrier"));
    }
    WriteFile(absl::StrCat(dir, "/", me), line);
    return absl::OkStatus();
  }
  if (Has(sc.removed, me)) {
    RETURN_IF_ERROR(Expect(
        absl::StrContains(result.left_because, "was removed in epoch "),
        absl::StrCat("removed rank: '", result.left_because, "'")));
    // The payload's epoch is the one the text names (a Shrink of several
    // rounds removes it in a later epoch than its mesh's next).
    const int64_t removed_in = result.left_info.removed_in_epoch;
    RETURN_IF_ERROR(Expect(
        removed_in > result.epoch && !result.left_info.fenced &&
            absl::StrContains(
                result.left_because,
                absl::StrCat("was removed in epoch ", removed_in, ":")),
        absl::StrCat("removed rank's kRemovedPayload: ", removed_in, ", epoch ",
                     result.epoch, ": ", result.left_because)));
    WriteFile(absl::StrCat(dir, "/", me), line);
    return absl::OkStatus();
  }
  // A survivor: its parameters equal a fresh run's.
  RETURN_IF_ERROR(Expect(result.left_because.empty(),
                         absl::StrCat("survivor left: ", result.left_because)));
  // Its last failed call names a rank found dead, as a payload.
  if (!result.last_error.empty() && !sc.dead.empty()) {
    RETURN_IF_ERROR(Expect(
        Has(sc.dead, result.last_error_info.peer),
        absl::StrCat("survivor's last error names peer ",
                     result.last_error_info.peer, ": ", result.last_error)));
  }
  RETURN_IF_ERROR(Expect(result.steps == kSteps, "steps"));
  std::vector<std::pair<int64_t, int64_t>> schedule = {{0, 3}};
  for (const auto& r : result.recoveries) {
    schedule.emplace_back(r.resumed_step, r.replicas);
  }
  const std::vector<float> want =
      Reference(result.shards, result.shard, kSteps, schedule);
  RETURN_IF_ERROR(Expect(
      result.params == want,
      absl::StrCat("rank ", me, " params [", absl::StrJoin(result.params, ","),
                   "], a fresh run gives [", absl::StrJoin(want, ","), "]")));
  const int64_t expected_recoveries = sc.dead.empty() ? 0 : 1;
  const int64_t recoveries = static_cast<int64_t>(result.recoveries.size());
  RETURN_IF_ERROR(Expect(
      recoveries == expected_recoveries ||
          (sc.timed_victim >= 0 && recoveries == 2),
      absl::StrCat("rank ", me, ": ", result.recoveries.size(),
                   " recoveries, want ", expected_recoveries,
                   [&] {
                     std::string all;
                     for (const auto& r : result.recoveries) {
                       absl::StrAppend(&all, " [", r.report.ToString(),
                                       "; after ", r.error, "]");
                     }
                     return all;
                   }())));
  // Every group a Shrink rebuilt says how: a CPU mesh's are made anew
  // ("(nccl_shrink)" is for NCCL groups only).
  for (const auto& each : result.recoveries) {
    for (const ShrinkReport& shrink : each.shrinks) {
      for (const std::string& g : shrink.rebuilt) {
        RETURN_IF_ERROR(Expect(
            absl::EndsWith(g, " (recreated)"),
            absl::StrCat("rank ", me, ": rebuilt group \"", g,
                         "\", want it to end in \" (recreated)\"")));
      }
    }
  }
  if (sc.rebuild_victim >= 0 || sc.timed_victim >= 0) {
    // How the second death was judged, from epoch 1's verdict (kept in the
    // store for good): "beacon" (its liveness port refused), "kernel" (its
    // process on this host is gone), "lease", or "none" (it fell outside
    // epoch 1).
    auto v = b.store()->GetIfSet(FailureWatch::EpochKey(1, "death"));
    std::string how = "none";
    if (v.ok() && v->has_value()) {
      const std::string& t = **v;
      how = absl::StrContains(t, "liveness port")          ? "beacon"
            : absl::StrContains(t, "process on this host") ? "kernel"
            : absl::StrContains(t, "lease was not renewed") ? "lease"
                                                            : "other";
    }
    absl::StrAppend(&line, " second_judged=", how);
  }
  if (!result.recoveries.empty()) {
    // The first recovery's failure and timings; the last one's resumption
    // and groups (the final mesh's); the dead and the rounds of every
    // Shrink.
    const auto& r = result.recoveries.front();
    const auto& last = result.recoveries.back();
    std::set<int> dead;
    int rounds = 0;
    for (const auto& each : result.recoveries) {
      for (const ShrinkReport& shrink : each.shrinks) {
        dead.insert(shrink.dead.begin(), shrink.dead.end());
        rounds += shrink.rounds;
      }
    }
    absl::StrAppend(&line, " failed=", r.failed_step, " resumed=",
                    last.resumed_step, " replicas=", last.replicas,
                    " failed_ns=", Ns(r.failed_at), " resumed_ns=",
                    Ns(last.resumed_at), " verdict_ns=",
                    Ns(r.report.verdict_time), " rounds=", rounds,
                    " agree_us=", absl::ToInt64Microseconds(r.report.agree),
                    " rebuild_us=", absl::ToInt64Microseconds(r.report.rebuild),
                    " dead=", absl::StrJoin(dead, ","), " kept=",
                    last.report.kept.size(), " rebuilt=",
                    last.report.rebuilt.size(), " kept_groups=", [&] {
                      // "tp [0, 1]" -> "tp:0|1"
                      std::vector<std::string> out;
                      for (std::string g : last.report.kept) {
                        absl::StrReplaceAll({{" [", ":"}, {", ", "|"}, {"]", ""}},
                                            &g);
                        out.push_back(g);
                      }
                      return absl::StrJoin(out, ",");
                    }());
  }
  WriteFile(absl::StrCat(dir, "/", me), line);
  return absl::OkStatus();
}

std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.size() == 2) out[p[0]] = p[1];
  }
  return out;
}

int64_t Int(const std::map<std::string, std::string>& f, const std::string& k) {
  int64_t v = -1;
  auto it = f.find(k);
  if (it != f.end()) (void)absl::SimpleAtoi(it->second, &v);
  return v;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

class ShrinkTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(ShrinkTest, SurvivorsGoOnWithTheRightState) {
  const Scenario& sc = GetParam();
  const int runs = absl::GetFlag(FLAGS_shrink_runs);
  int failures = 0;
  std::vector<double> recovery, detect, agree, rebuild, second;
  std::map<std::string, int> judged;  // how the second death was judged
  double slowest = 0;
  for (int n = 0; n < runs; ++n) {
    const std::string run = absl::StrCat(sc.name, "_", n);
    const std::string dir = Dir(run);
    std::string cmd = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    RunRanksOptions options;
    options.timeout = absl::Seconds(60);
    if (Etcd() != nullptr) {
      options.store_address = Etcd()->Address(
          absl::StrCat("/devmesh-test/shrink/", getpid(), "/", run, "/"));
    }
    const absl::Time start = absl::Now();
    std::vector<RankOutcome> out = RunRanksDetailed(
        kRanks, [&](Bootstrap& b) { return Body(b, sc, dir); }, options);
    slowest = std::max(slowest, absl::ToDoubleSeconds(absl::Now() - start));
    bool ok = true;
    auto fail = [&](const std::string& why) {
      ok = false;
      ADD_FAILURE() << sc.name << " run " << n << ": " << why;
    };
    // Nothing left behind: no child process of this test, running or
    // unreaped, but the etcd member. (Its groups are Gloo's, which make no
    // /dev/shm entry; the directory is not counted, other tests may be
    // using it meanwhile.)
    if (Etcd() == nullptr) {
      if (waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD) {
        fail("a child process is left after the run");
      }
    } else if (std::vector<int> left = ChildrenBut(Etcd()->pid(0));
               !left.empty()) {
      fail(absl::StrCat("child processes left after the run: ",
                        absl::StrJoin(left, ", ")));
    }
    std::map<int, std::map<std::string, std::string>> f;
    for (const RankOutcome& o : out) {
      const bool killed =
          (Has(sc.victims, o.rank) && sc.fault != Fault::kStop &&
           sc.fault != Fault::kNone) ||
          o.rank == sc.second_victim || o.rank == sc.rebuild_victim ||
          o.rank == sc.timed_victim;
      if (killed) {
        if (o.reported) fail(absl::StrCat("rank ", o.rank, " was not killed"));
        continue;
      }
      if (!o.reported || !o.status.ok()) {
        fail(absl::StrCat("rank ", o.rank, ": ", o.status.ToString(), " (exit ",
                          o.exit_code, ")"));
        continue;
      }
      f[o.rank] = Fields(ReadFile(absl::StrCat(dir, "/", o.rank)));
    }
    if (!sc.refused.empty()) {
      std::set<std::string> texts;
      for (auto& [rank, fields] : f) {
        const std::string line = ReadFile(absl::StrCat(dir, "/", rank));
        const size_t at = line.find(" refused=");
        texts.insert(at == std::string::npos ? "(none)" : line.substr(at));
      }
      if (texts.size() != 1) fail("live ranks were refused with different texts");
      if (!ok) ++failures;
      continue;
    }
    // Survivors agree on where they resumed; at most one step lost.
    int64_t resumed = -2, last_resumed_ns = 0, first_verdict_ns = INT64_MAX;
    bool judged_counted = false;
    int64_t max_agree = 0, max_rebuild = 0;
    for (auto& [rank, fields] : f) {
      if (Has(sc.removed, rank) || Has(sc.fenced, rank)) continue;
      const int64_t epoch = Int(fields, "epoch");
      if (sc.epoch < 0 ? epoch != 1 && epoch != 2
                       : epoch != (sc.dead.empty() ? 0 : sc.epoch)) {
        fail(absl::StrCat("rank ", rank, " ends at epoch ",
                          Int(fields, "epoch")));
      }
      if (sc.dead.empty()) continue;
      if (fields["dead"] != absl::StrJoin(sc.dead, ",")) {
        fail(absl::StrCat("rank ", rank, " found dead [", fields["dead"],
                          "], want [", absl::StrJoin(sc.dead, ","), "]"));
      }
      if (sc.rounds >= 0 && Int(fields, "rounds") != sc.rounds) {
        fail(absl::StrCat("rank ", rank, " took ", Int(fields, "rounds"),
                          " Shrink rounds, want ", sc.rounds));
      }
      if (Int(fields, "replicas") != sc.replicas) {
        fail(absl::StrCat("rank ", rank, " has ", Int(fields, "replicas"),
                          " replicas"));
      }
      if (sc.kept >= 0 && (Int(fields, "kept") != sc.kept ||
                           Int(fields, "rebuilt") != 2 - sc.kept)) {
        fail(absl::StrCat("rank ", rank, " kept ", fields["kept"],
                          " groups and rebuilt ", fields["rebuilt"], ", want ",
                          sc.kept, " and ", 2 - sc.kept));
      }
      // A kept group is kept by every member.
      for (absl::string_view g :
           absl::StrSplit(fields["kept_groups"], ',', absl::SkipEmpty())) {
        const std::string group(g);
        const std::string members = group.substr(group.find(':') + 1);
        for (absl::string_view m : absl::StrSplit(members, '|')) {
          int other = -1;
          if (!absl::SimpleAtoi(m, &other) || !f.count(other) ||
              !absl::StrContains(absl::StrCat(",", f[other]["kept_groups"], ","),
                                 absl::StrCat(",", group, ","))) {
            fail(absl::StrCat("rank ", rank, " kept ", group, " but rank ",
                              std::string(m), " did not"));
          }
        }
      }
      if (Int(fields, "failed") - Int(fields, "resumed") > 1) {
        fail(absl::StrCat("rank ", rank, " lost ",
                          Int(fields, "failed") - Int(fields, "resumed"),
                          " steps"));
      }
      if (resumed != -2 && resumed != Int(fields, "resumed")) {
        fail("survivors resumed at different steps");
      }
      resumed = Int(fields, "resumed");
      last_resumed_ns = std::max(last_resumed_ns, Int(fields, "resumed_ns"));
      const int64_t v = Int(fields, "verdict_ns");
      if (v > 0) first_verdict_ns = std::min(first_verdict_ns, v);
      max_agree = std::max(max_agree, Int(fields, "agree_us"));
      if (!judged_counted && fields.count("second_judged")) {
        ++judged[fields["second_judged"]];  // once a launch (the same key)
        judged_counted = true;
      }
      max_rebuild = std::max(max_rebuild, Int(fields, "rebuild_us"));
    }
    if (!sc.dead.empty() && ok) {
      int64_t fault_ns = 0;
      (void)absl::SimpleAtoi(ReadFile(absl::StrCat(dir, "/fault_ns")),
                             &fault_ns);
      recovery.push_back((last_resumed_ns - fault_ns) / 1e6);
      if (first_verdict_ns != INT64_MAX) {
        detect.push_back((first_verdict_ns - fault_ns) / 1e6);
      }
      agree.push_back(max_agree / 1e3);
      rebuild.push_back(max_rebuild / 1e3);
      int64_t second_ns = 0;
      if ((sc.rebuild_victim >= 0 || sc.timed_victim >= 0) &&
          absl::SimpleAtoi(ReadFile(absl::StrCat(dir, "/rebuild_fault_ns")),
                           &second_ns) &&
          second_ns > 0) {
        second.push_back((last_resumed_ns - second_ns) / 1e6);
        std::printf("shrink %s run %d: second kill to the last survivor "
                    "resumed %.0f ms\n",
                    sc.name.c_str(), n, second.back());
        if (absl::Nanoseconds(last_resumed_ns - second_ns) > sc.resume_bound) {
          fail(absl::StrCat("the last survivor resumed ",
                            (last_resumed_ns - second_ns) / 1000000,
                            " ms after the second kill, past ",
                            absl::FormatDuration(sc.resume_bound)));
        }
      }
      std::printf("shrink %s run %d: recovery %.0f ms (detect %.0f, agree %.0f, "
                  "rebuild %.0f), resumed at step %lld\n",
                  sc.name.c_str(), n, recovery.back(),
                  detect.empty() ? -1.0 : detect.back(), agree.back(),
                  rebuild.back(), static_cast<long long>(resumed));
    }
    if (!ok) ++failures;
  }
  std::printf("shrink %s: %d launches, %d failed, slowest launch %.1f s",
              sc.name.c_str(), runs, failures, slowest);
  if (!recovery.empty()) {
    std::printf("; recovery ms p50 %.0f p95 %.0f max %.0f; detect p50 %.0f; "
                "agree p50 %.0f; rebuild p50 %.0f",
                Percentile(recovery, 0.5), Percentile(recovery, 0.95),
                Percentile(recovery, 1.0), Percentile(detect, 0.5),
                Percentile(agree, 0.5), Percentile(rebuild, 0.5));
  }
  if (!second.empty()) {
    std::printf("; second kill to resumed ms p50 %.0f p95 %.0f max %.0f "
                "(bound %s; lease period %s, store %s)",
                Percentile(second, 0.5), Percentile(second, 0.95),
                Percentile(second, 1.0),
                absl::FormatDuration(sc.resume_bound).c_str(),
                absl::FormatDuration(LeasePeriod()).c_str(),
                absl::GetFlag(FLAGS_store).c_str());
  }
  if (!judged.empty()) {
    std::vector<std::string> parts;
    for (const auto& [how, n] : judged) parts.push_back(absl::StrCat(how, " ", n));
    std::printf("; second death judged by: %s", absl::StrJoin(parts, ", ").c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Faults, ShrinkTest, ::testing::ValuesIn(Scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
