// devmesh/tests/device_mesh/grow_test.cc
// Spares and DeviceMesh::Grow with real processes and real faults: the worked
// example's model (examples/elastic) trains a (dp=3, tp=2) mesh over 6
// processes on Gloo, started by the test:
//   heal_kill_replica     ranks 2 and 3 (all of replica 1) are SIGKILLed at
//                         step kFaultStep; the survivors shrink to (2, 2);
//                         rank 0 restarts both as new processes that wait as
//                         spares (DeviceMesh::JoinAsSpare); from step
//                         kGrowStep every member calls Grow("dp") each step
//                         until it admits them: (3, 2) again, the state
//                         broadcast from replica 0 (BroadcastState), and the
//                         run finishes
//   heal_removed_stays    rank 2 is SIGKILLed; rank 3 (alive, removed with
//                         its replica) stays as a spare with its own
//                         runtime; rank 0 restarts rank 2; both are admitted
//   spare_dies_before_grow  as heal_kill_replica, but the restarted rank 3
//                         SIGKILLs itself once both spares registered: the
//                         first Grow admits no one (rank 2 alone is half a
//                         replica: it waits); rank 0 restarts rank 3 again
//                         and a later Grow admits both
//   spare_dies_in_grow    as heal_kill_replica, but the restarted rank 3
//                         SIGKILLs itself in the Grow, as it publishes its
//                         first new group's address: every member's Grow
//                         shrinks the new mesh again (report.shrunk_after,
//                         epoch 3, (2, 2)), the restarted rank 2 waits
//                         again, rank 0 restarts rank 3 once more and a
//                         later Grow admits both (epoch 4)
//   fenced_refused        rank 2 is SIGSTOPped for 4 s (> the 2 s silence),
//                         found dead and fenced; continued, its
//                         JoinAsSpare is refused (FailedPrecondition with
//                         kFencedPayload); the others finish as (2, 2)
// Each run checks every rank's final parameters bit for bit against a fresh
// run with the same replica counts (Reference), the Grow's report (admitted
// ranks, new replica, epoch, kept and rebuilt groups) exactly, that every
// restarted spare exits 0 having checked its own parameters, and that no
// process is left. --grow_runs sets the launches per scenario; the test
// prints one table (launches, failures, slowest launch, heal time p50/max:
// the Grow call that admitted to the state broadcast done, on rank 0).
//
// A spare is this binary again (posix_spawn of /proc/self/exe by rank 0)
// with GROW_TEST_SPARE set: main() runs SpareMain instead of the tests.
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
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
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/error_info.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "device_mesh/state_broadcast.h"
#include "examples/elastic/elastic_training.h"
#include "gtest/gtest.h"
#include "store/forwarding_store.h"
#include "store/tcp_store_client.h"
#include "tests/device_mesh/mesh_checks.h"

extern char** environ;

ABSL_FLAG(int, grow_runs, 2, "launches per scenario");

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
constexpr int64_t kSteps = 16;
constexpr int64_t kFaultStep = 4;
constexpr int64_t kGrowStep = 6;
constexpr int64_t kPad = 1 << 12;

enum class Scenario {
  kKillReplica,
  kRemovedStays,
  kSpareDies,
  kSpareDiesInGrow,
  kFenced
};

// The store of a spare that SIGKILLs itself at its first publish of a
// group key (Gloo's MultiSet), once admitted.
class DieAtGroupPublishStore : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  absl::Status MultiSet(absl::Span<const std::string> k,
                        absl::Span<const std::string> v) override {
    if (!k.empty() && absl::StartsWith(k[0], "devmesh/group/")) {
      raise(SIGKILL);
    }
    return base()->MultiSet(k, v);
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

bool IsStopped(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         stat[paren + 2] == 'T';
}

// Stops this process for `d`: a child sends SIGCONT after `d` and exits.
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

MeshOptions Options() {
  MeshOptions options;
  options.all.backend = "gloo";
  options.all.timeout = absl::Seconds(30);
  return options;
}

TrainOptions Training(int64_t start, std::vector<float> params, int64_t end) {
  TrainOptions t;
  t.steps = end;
  t.pad = kPad;
  t.shrink.timeout = absl::Seconds(20);
  t.start_step = start;
  t.start_params = std::move(params);
  return t;
}

// The state a newcomer gets: its shard's parameters, the steps done, and
// the step the job resumed at after the Shrink (for the reference).
struct State {
  std::vector<float> params = std::vector<float>(elastic_example::kShard);
  int64_t done = 0;
  int64_t resumed = 0;
};
absl::Status Broadcast(const DeviceMesh& mesh, State& s) {
  const std::vector<StateBuffer> buffers = {
      StateBuffer::Of(absl::MakeSpan(s.params)),
      StateBuffer::Of(absl::MakeSpan(&s.done, 1)),
      StateBuffer::Of(absl::MakeSpan(&s.resumed, 1))};
  // Small chunks, so that the chunking runs.
  return BroadcastState(mesh, "dp", buffers, 0, 8);
}

// Trains `mesh` from the broadcast state to the end; checks the result.
absl::Status FinishAndCheck(const DeviceMesh& mesh, const State& s,
                            int64_t grew_at, int me) {
  ASSIGN_OR_RETURN(result, elastic_example::Train(
                               mesh, Training(s.done, s.params, kSteps)));
  RETURN_IF_ERROR(Expect(result.recoveries.empty() && result.steps == kSteps,
                         absl::StrCat("rank ", me, " after the Grow: steps ",
                                      result.steps, ", ",
                                      result.recoveries.size(),
                                      " recoveries: ", result.last_error)));
  const std::vector<float> want =
      Reference(2, result.shard, kSteps,
                {{0, 3}, {s.resumed, 2}, {grew_at, 3}});
  return Expect(result.params == want,
                absl::StrCat("rank ", me, ": final parameters [",
                             absl::StrJoin(result.params, ","), "], want [",
                             absl::StrJoin(want, ","), "] (resumed at ",
                             s.resumed, ", grown at ", grew_at, ")"));
}

// ---- The spare process -------------------------------------------------------

// GROW_TEST_SPARE="<rank>,<port>,<die>,<epoch>": rank `rank` of the job
// whose store listens on 127.0.0.1:<port>; die=1: SIGKILL itself once two
// spares registered in epoch 1; die=2: SIGKILL itself at its first group
// publish once admitted; else it expects to be admitted into `epoch`.
int SpareMain(const std::string& spec) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::vector<std::string> f = absl::StrSplit(spec, ',');
  int me = 0, port = 0, die = 0;
  int64_t want_epoch = 0;
  if (f.size() != 4 || !absl::SimpleAtoi(f[0], &me) ||
      !absl::SimpleAtoi(f[1], &port) || !absl::SimpleAtoi(f[2], &die) ||
      !absl::SimpleAtoi(f[3], &want_epoch)) {
    std::fprintf(stderr, "[spare] bad GROW_TEST_SPARE '%s'\n", spec.c_str());
    return 2;
  }
  auto run = [&]() -> absl::Status {
    TcpStoreClientOptions o;
    o.port = port;
    o.connect_timeout = absl::Seconds(10);
    ASSIGN_OR_RETURN(client, TcpStoreClient::Connect(o));
    std::shared_ptr<Store> store(std::move(client));
    if (die == 2) store = std::make_shared<DieAtGroupPublishStore>(store);
    ASSIGN_OR_RETURN(runtime, MeshRuntime::Create(store, me, kRanks, me));
    if (die == 1) {
      std::thread([runtime] {
        (void)DeviceMesh::JoinAsSpare(runtime);
      }).detach();
      const absl::Time until = absl::Now() + absl::Seconds(30);
      while (absl::Now() < until) {
        auto n = store->Add("devmesh/epoch/1/spares", 0);
        if (n.ok() && *n >= 2) raise(SIGKILL);
        absl::SleepFor(absl::Milliseconds(5));
      }
      return absl::DeadlineExceededError("the other spare never registered");
    }
    SpareOptions spare;
    spare.timeout = absl::Seconds(60);
    ASSIGN_OR_RETURN(joined, DeviceMesh::JoinAsSpare(runtime, spare));
    RETURN_IF_ERROR(Expect(
        joined.report.grown && joined.report.epoch == want_epoch &&
            joined.report.admitted == std::vector<int>{2, 3} &&
            joined.report.new_replicas == std::vector<int64_t>{2} &&
            joined.report.kept.empty() &&
            joined.mesh.layout().RankTable() ==
                std::vector<int64_t>{0, 1, 4, 5, 2, 3} &&
            joined.mesh.ToString() == "DeviceMesh(dp=3, tp=2, 'cpu')",
        absl::StrCat("spare ", me, ": ", joined.report.ToString(), " ",
                     joined.mesh.ToString())));
    State s;
    RETURN_IF_ERROR(Broadcast(joined.mesh, s));
    return FinishAndCheck(joined.mesh, s, s.done, me);
  };
  absl::Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "[spare %d] %s\n", me, s.ToString().c_str());
    return 1;
  }
  return 0;
}

pid_t SpawnSpare(int rank, int port, int die, int64_t want_epoch) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "GROW_TEST_SPARE=")) env.push_back(*e);
  }
  env.push_back(absl::StrCat("GROW_TEST_SPARE=", rank, ",", port, ",", die,
                             ",", want_epoch));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, exe, nullptr, nullptr, argv, envp.data()) != 0) {
    return -1;
  }
  return pid;
}

// Waits for `pid` (a spare this process started) up to `limit`, then kills
// it; its wait status.
int Reap(pid_t pid, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() >= end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return status;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return status;
}

// ---- One launch ----------------------------------------------------------------

// What rank 0 writes for the table: the heal time in microseconds.
absl::Status Rank(Bootstrap& b, Scenario sc, const std::string& dir,
                  int port) {
  const int me = b.rank();
  ASSIGN_OR_RETURN(runtime, MeshRuntime::Create(b.store(), me, b.world_size(),
                                                b.local_rank()));
  ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {3, 2}, {"dp", "tp"},
                                        Options()));
  WriteFile(absl::StrCat(dir, "/pid_", me), absl::StrCat(getpid()));
  std::vector<int> victims = {2};
  if (sc == Scenario::kKillReplica || sc == Scenario::kSpareDies ||
      sc == Scenario::kSpareDiesInGrow) {
    victims = {2, 3};
  }
  const int64_t want_epoch = sc == Scenario::kSpareDiesInGrow ? 4 : 2;
  auto hook = [&](Point p, int64_t step, int64_t epoch) {
    if (epoch != 0 || step != kFaultStep || me != 2 ||
        p != Point::kBeforeShardAllReduce) {
      return;
    }
    if (sc == Scenario::kFenced) {
      StopFor(absl::Seconds(4));
      return;
    }
    if (victims.size() == 2) {
      // Stop rank 3 first (no one has died yet), then kill it and this one.
      int pid = 0;
      if (absl::SimpleAtoi(ReadFile(absl::StrCat(dir, "/pid_3")), &pid) &&
          pid > 0) {
        kill(pid, SIGSTOP);
        const absl::Time end = absl::Now() + absl::Seconds(2);
        while (absl::Now() < end && !IsStopped(pid)) {
          absl::SleepFor(absl::Microseconds(100));
        }
        kill(pid, SIGKILL);
      }
    }
    raise(SIGKILL);
  };
  ASSIGN_OR_RETURN(first, elastic_example::Train(
                              mesh, Training(0, {}, kGrowStep), hook));
  if (sc == Scenario::kFenced && me == 2) {
    RETURN_IF_ERROR(Expect(first.left_info.fenced,
                           absl::StrCat("rank 2 was not fenced: ",
                                        first.left_because)));
    auto refused = DeviceMesh::JoinAsSpare(runtime);
    const std::string prefix =
        "global rank 2 (this process) cannot come back as a spare: the job "
        "declared it dead and fenced it (";
    const std::string suffix =
        "); start a new process for global rank 2 instead";
    return Expect(absl::IsFailedPrecondition(refused.status()) &&
                      GetErrorInfo(refused.status()).fenced &&
                      absl::StartsWith(refused.status().message(), prefix) &&
                      absl::EndsWith(refused.status().message(), suffix),
                  absl::StrCat("the fenced rank's JoinAsSpare: ",
                               refused.status().ToString()));
  }
  if (me == 3 && !first.left_because.empty()) {
    RETURN_IF_ERROR(Expect(
        first.left_info.removed_in_epoch == 1,
        absl::StrCat("rank 3 left: ", first.left_because)));
    if (sc != Scenario::kRemovedStays) return absl::OkStatus();
    // Alive, removed with its replica: stays as a spare.
    ASSIGN_OR_RETURN(joined, DeviceMesh::JoinAsSpare(runtime));
    RETURN_IF_ERROR(Expect(
        joined.report.grown && joined.report.admitted ==
                                   std::vector<int>{2, 3},
        absl::StrCat("rank 3 as a spare: ", joined.report.ToString())));
    State s;
    RETURN_IF_ERROR(Broadcast(joined.mesh, s));
    return FinishAndCheck(joined.mesh, s, s.done, me);
  }
  RETURN_IF_ERROR(Expect(
      first.left_because.empty() && first.recoveries.size() == 1 &&
          first.steps == kGrowStep && first.mesh.has_value(),
      absl::StrCat("rank ", me, " before the Grow: steps ", first.steps,
                   ", recoveries ", first.recoveries.size(), ", left '",
                   first.left_because, "', last error ", first.last_error)));
  State s;
  s.params = first.params;
  s.done = first.steps;
  s.resumed = first.recoveries[0].resumed_step;
  DeviceMesh current = *first.mesh;
  if (sc == Scenario::kFenced) {
    ASSIGN_OR_RETURN(rest, elastic_example::Train(
                               current, Training(s.done, s.params, kSteps)));
    const std::vector<float> want =
        Reference(2, rest.shard, kSteps, {{0, 3}, {s.resumed, 2}});
    return Expect(rest.params == want && rest.recoveries.empty(),
                  absl::StrCat("rank ", me, ": final [",
                               absl::StrJoin(rest.params, ","), "] want [",
                               absl::StrJoin(want, ","), "]"));
  }
  std::vector<pid_t> spares;
  struct ReapAll {
    std::vector<pid_t>& pids;
    ~ReapAll() {
      for (pid_t p : pids) (void)Reap(p, absl::Seconds(5));
    }
  } reap_all{spares};
  if (me == 0) {
    // The launcher's part: restart the dead ranks as spares.
    for (int v : victims) {
      const int die = v != 3                              ? 0
                      : sc == Scenario::kSpareDies        ? 1
                      : sc == Scenario::kSpareDiesInGrow ? 2
                                                          : 0;
      const pid_t pid = SpawnSpare(v, port, die, want_epoch);
      RETURN_IF_ERROR(Expect(pid > 0, "posix_spawn failed"));
      spares.push_back(pid);
    }
  }
  GrowOptions grow;
  if (sc == Scenario::kSpareDies) {
    // Margin for the surviving spare's lease on a loaded machine.
    grow.lease = absl::Seconds(1);
    if (me == 0) {
      // Rank 3's spare registers, then dies; only then does rank 0 call
      // Grow (the decision needs every member).
      int status = 0;
      waitpid(spares[1], &status, 0);
      spares.erase(spares.begin() + 1);
      RETURN_IF_ERROR(Expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                             "the dying spare did not die by SIGKILL"));
    }
    // Every member calls the Grow only now (a barrier over both dims), so
    // that the dead spare cannot answer its call.
    for (const char* dim : {"dp", "tp"}) {
      ASSIGN_OR_RETURN(group, current.GetGroup(dim));
      RETURN_IF_ERROR(group->Barrier());
    }
    ASSIGN_OR_RETURN(unchanged, current.Grow("dp", grow));
    RETURN_IF_ERROR(Expect(
        !unchanged.report.grown && unchanged.report.epoch == 1 &&
            unchanged.report.waiting == std::vector<int>{2} &&
            unchanged.mesh == current && unchanged.mesh.epoch() == 1,
        absl::StrCat("rank ", me, ": first Grow: ",
                     unchanged.report.ToString())));
    if (me == 0) {
      const pid_t pid = SpawnSpare(3, port, 0, want_epoch);
      RETURN_IF_ERROR(Expect(pid > 0, "posix_spawn failed"));
      spares.push_back(pid);
    }
  }
  bool shrunk_in_grow = false;
  // Grow between steps until the spares are admitted.
  absl::Time grow_called;
  for (;;) {
    grow_called = absl::Now();
    ASSIGN_OR_RETURN(grown, current.Grow("dp", grow));
    current = grown.mesh;
    if (!grown.report.shrunk_after.empty()) {
      // The admitted rank 3 died in the Grow: shrunk again, on every member.
      RETURN_IF_ERROR(Expect(
          sc == Scenario::kSpareDiesInGrow && !shrunk_in_grow &&
              !grown.report.grown && grown.report.epoch == 3 &&
              grown.report.admitted == std::vector<int>{2, 3} &&
              current.epoch() == 3 &&
              current.layout().RankTable() ==
                  std::vector<int64_t>{0, 1, 4, 5},
          absl::StrCat("rank ", me, ": ", grown.report.ToString())));
      shrunk_in_grow = true;
      if (me == 0) {
        int status = 0;
        waitpid(spares[1], &status, 0);
        spares.erase(spares.begin() + 1);
        RETURN_IF_ERROR(Expect(
            WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
            "the spare that dies in the Grow did not die by SIGKILL"));
        const pid_t pid = SpawnSpare(3, port, 0, want_epoch);
        RETURN_IF_ERROR(Expect(pid > 0, "posix_spawn failed"));
        spares.push_back(pid);
      }
      continue;
    }
    if (grown.report.grown) {
      const int tp_peer = me % 2 == 0 ? me + 1 : me - 1;
      const std::vector<int> pair = {std::min(me, tp_peer),
                                     std::max(me, tp_peer)};
      const std::string kept =
          absl::StrCat("tp [", absl::StrJoin(pair, ", "), "]");
      const std::string rebuilt =
          me % 2 == 0 ? "dp [0, 4, 2]" : "dp [1, 5, 3]";
      RETURN_IF_ERROR(Expect(
          grown.report.epoch == want_epoch &&
              (sc != Scenario::kSpareDiesInGrow || shrunk_in_grow) &&
              grown.report.admitted == std::vector<int>{2, 3} &&
              grown.report.new_replicas == std::vector<int64_t>{2} &&
              grown.report.kept == std::vector<std::string>{kept} &&
              grown.report.rebuilt == std::vector<std::string>{rebuilt} &&
              current.epoch() == want_epoch && current.ToString() ==
                                          "DeviceMesh(dp=3, tp=2, 'cpu')",
          absl::StrCat("rank ", me, ": ", grown.report.ToString())));
      break;
    }
    if (s.done >= kSteps - 2) {
      // Steps left for after the Grow: wait for the spares (a slow start,
      // under a sanitizer) without training, up to the run's limit.
      absl::SleepFor(absl::Milliseconds(50));
      continue;
    }
    ASSIGN_OR_RETURN(step, elastic_example::Train(
                               current, Training(s.done, s.params, s.done + 1)));
    RETURN_IF_ERROR(Expect(step.recoveries.empty() && step.steps == s.done + 1,
                           absl::StrCat("a step between Grows failed: ",
                                        step.last_error)));
    s.params = step.params;
    s.done = step.steps;
  }
  RETURN_IF_ERROR(Broadcast(current, s));
  if (me == 0) {
    WriteFile(absl::StrCat(dir, "/heal"),
              absl::StrCat(absl::ToInt64Microseconds(absl::Now() - grow_called)));
  }
  RETURN_IF_ERROR(FinishAndCheck(current, s, s.done, me));
  for (pid_t p : spares) {
    const int status = Reap(p, absl::Seconds(30));
    RETURN_IF_ERROR(Expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                           absl::StrCat("a spare (pid ", p, ") ended with "
                                        "wait status ", status)));
  }
  spares.clear();
  return absl::OkStatus();
}

struct Figures {
  int launches = 0;
  int failures = 0;
  absl::Duration slowest;
  std::vector<int64_t> heal_us;
};

void RunScenario(const char* name, Scenario sc) {
  Figures f;
  for (int run = 0; run < absl::GetFlag(FLAGS_grow_runs); ++run) {
    const std::string dir = absl::StrCat(
        std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp",
        "/grow_", name, "_", run, "_", getpid());
    mkdir(dir.c_str(), 0700);
    RunRanksOptions options;
    options.timeout = absl::Seconds(90);
    // The store's port, for the restarted ranks: read in the rank from the
    // bootstrap (the parent hosts the store on 127.0.0.1).
    const absl::Time start = absl::Now();
    std::vector<RankOutcome> outcomes = RunRanksDetailed(
        kRanks,
        [&](Bootstrap& b) { return Rank(b, sc, dir, b.info().store_port); },
        options);
    const absl::Duration took = absl::Now() - start;
    ++f.launches;
    f.slowest = std::max(f.slowest, took);
    bool ok = outcomes.size() == kRanks;
    for (const RankOutcome& o : outcomes) {
      const bool victim =
          o.rank == 2 ||
          (o.rank == 3 && (sc == Scenario::kKillReplica ||
                           sc == Scenario::kSpareDies ||
                           sc == Scenario::kSpareDiesInGrow));
      const bool killed = victim && sc != Scenario::kFenced;
      if (killed) {
        EXPECT_FALSE(o.reported) << name << " run " << run << ": rank "
                                 << o.rank << " reported " << o.status;
        ok = ok && !o.reported;
        continue;
      }
      EXPECT_TRUE(o.reported && o.status.ok())
          << name << " run " << run << ": rank " << o.rank << ": "
          << o.status;
      ok = ok && o.reported && o.status.ok();
    }
    int64_t heal = 0;
    if (absl::SimpleAtoi(ReadFile(absl::StrCat(dir, "/heal")), &heal)) {
      f.heal_us.push_back(heal);
    }
    if (!ok) ++f.failures;
  }
  std::sort(f.heal_us.begin(), f.heal_us.end());
  std::printf(
      "%-24s launches %d failures %d slowest %s heal p50 %s max %s\n", name,
      f.launches, f.failures, absl::FormatDuration(f.slowest).c_str(),
      f.heal_us.empty()
          ? "-"
          : absl::FormatDuration(
                absl::Microseconds(f.heal_us[f.heal_us.size() / 2]))
                .c_str(),
      f.heal_us.empty()
          ? "-"
          : absl::FormatDuration(absl::Microseconds(f.heal_us.back())).c_str());
  std::fflush(stdout);
}

// No spare: Grow changes nothing (the same mesh and epoch on every rank);
// members that ask for different dims all fail alike, and the next Grow
// (a new attempt) agrees again.
TEST(Grow, control_and_disagreement) {
  const std::string want =
      "Grow of epoch 0: the members disagree on what to grow: global rank 1 "
      "asked for mesh dim 'tp' (target_replicas 2), global rank 0 for mesh "
      "dim 'dp' (target_replicas 3); every member fails with this error";
  for (int run = 0; run < absl::GetFlag(FLAGS_grow_runs); ++run) {
    RunRanksOptions options;
    std::vector<RankOutcome> outcomes = RunRanksDetailed(
        kRanks,
        [&](Bootstrap& b) -> absl::Status {
          const int me = b.rank();
          ASSIGN_OR_RETURN(runtime, MeshRuntime::Create(b.store(), me,
                                                        kRanks, me));
          ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {3, 2},
                                                {"dp", "tp"}, Options()));
          ASSIGN_OR_RETURN(first, elastic_example::Train(
                                      mesh, Training(0, {}, 2)));
          ASSIGN_OR_RETURN(same, mesh.Grow("dp"));
          RETURN_IF_ERROR(Expect(
              !same.report.grown && same.report.epoch == 0 &&
                  same.report.waiting.empty() && same.mesh == mesh &&
                  same.mesh.epoch() == 0 &&
                  same.report.ToString() ==
                      "epoch 0: unchanged (no whole replica of spares "
                      "ready); waiting []",
              absl::StrCat("rank ", me, ": ", same.report.ToString())));
          auto split = mesh.Grow(me % 2 == 1 ? "tp" : "dp");
          RETURN_IF_ERROR(Expect(
              absl::IsInvalidArgument(split.status()) &&
                  split.status().message() == want &&
                  GetErrorInfo(split.status()).disagreeing == 1,
              absl::StrCat("rank ", me, ": ", split.status().ToString())));
          ASSIGN_OR_RETURN(again, mesh.Grow("dp"));
          RETURN_IF_ERROR(Expect(!again.report.grown && again.mesh == mesh,
                                 again.report.ToString()));
          ASSIGN_OR_RETURN(rest, elastic_example::Train(
                                     mesh, Training(first.steps, first.params,
                                                    4)));
          const std::vector<float> ref =
              Reference(2, rest.shard, 4, {{0, 3}});
          return Expect(rest.params == ref && rest.recoveries.empty(),
                        absl::StrCat("rank ", me, ": final [",
                                     absl::StrJoin(rest.params, ","), "]"));
        },
        options);
    ASSERT_EQ(outcomes.size(), static_cast<size_t>(kRanks));
    for (const RankOutcome& o : outcomes) {
      EXPECT_TRUE(o.reported && o.status.ok())
          << "run " << run << ": rank " << o.rank << ": " << o.status;
    }
  }
}

TEST(Grow, heal_kill_replica) { RunScenario("heal_kill_replica", Scenario::kKillReplica); }
TEST(Grow, heal_removed_stays) { RunScenario("heal_removed_stays", Scenario::kRemovedStays); }
TEST(Grow, spare_dies_before_grow) { RunScenario("spare_dies_before_grow", Scenario::kSpareDies); }
TEST(Grow, spare_dies_in_grow) { RunScenario("spare_dies_in_grow", Scenario::kSpareDiesInGrow); }
TEST(Grow, fenced_refused) { RunScenario("fenced_refused", Scenario::kFenced); }

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  if (const char* spec = std::getenv("GROW_TEST_SPARE")) {
    return devmesh::SpareMain(spec);
  }
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
