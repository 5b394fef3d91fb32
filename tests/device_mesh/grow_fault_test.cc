// devmesh/tests/device_mesh/grow_fault_test.cc
// Deaths during DeviceMesh::Grow, real processes: the worked example's model
// (examples/elastic) trains a (dp=3, tp=2) mesh of 6 processes on Gloo;
// ranks 2 and 3 (replica 1) are SIGKILLed at step kFaultStep, the survivors
// shrink to (2, 2) = [0, 1, 4, 5], rank 0 restarts 2 and 3 as spares, and
// once both registered every member calls Grow("dp"), which admits them.
// A fault then hits that Grow:
//   member_dies_entering_grow   rank 4 (a member) SIGKILLs itself as it
//                               would call Grow: every other member's Grow
//                               fails with the same FailedPrecondition (the
//                               verdict; "call Shrink first"), they Shrink
//                               to (1, 2) (rank 5 removed), and the next
//                               Grow admits the spares: [0, 1, 2, 3], epoch 3
//   member_dies_in_grow_rebuild rank 4 SIGKILLs itself in the Grow's rebuild,
//                               at its first new group's publish: every
//                               member and both spares get the same shrunk
//                               mesh from that Grow (report.shrunk_after):
//                               [0, 1, 2, 3], epoch 3
//   member_dies_in_grow_at_Nms  rank 4 SIGKILLs itself N ms (0..20) after it
//                               entered Grow
//   spare_dies_in_grow_at_Nms   the restarted rank 3 SIGKILLs itself N ms
//                               after it answered the Grow's call; rank 0
//                               restarts it again, a later Grow admits it:
//                               [0, 1, 4, 5, 2, 3], epoch 4
// In the sweeps the death lands in the agreement, the rebuild, the state
// broadcast, or not at all (the victim finished its heal first and
// disarmed). Every participant's heal is: Grow (or JoinAsSpare), then
// BroadcastState from replica 0, then a barrier along dp and along tp; a
// failure of any of them is answered with Shrink and the heal goes on. The
// group timeout (120 s) is past the run's limit (90 s), so only a verdict
// can end a wait on the dead rank. Checked per launch: every finishing rank
// (members and spares) ends with the same mesh and epoch, one of the
// scenario's outcomes; members 0 and 1 saw the same sequence of results; no
// error but the verdict's FailedPrecondition and a removal; final
// parameters bit for bit against a fresh run with the same replica counts;
// every spare exits 0; no process left. --grow_fault_runs sets the launches
// per scenario; one table line per scenario: launches, failures, outcomes,
// slowest launch, heal time max (rank 0: first Grow call to its heal done).
//
// A spare is this binary again (posix_spawn of /proc/self/exe by rank 0)
// with GROW_FAULT_SPARE set: main() runs SpareMain instead of the tests.
#include <errno.h>
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
#include <memory>
#include <mutex>
#include <optional>
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

ABSL_FLAG(int, grow_fault_runs, 1, "launches per scenario");

namespace devmesh {
namespace {

using ::devmesh::elastic_example::Point;
using ::devmesh::elastic_example::Reference;
using ::devmesh::elastic_example::TrainOptions;
using ::devmesh::testing::Expect;
using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;

constexpr int kRanks = 6;
constexpr int64_t kSteps = 12;
constexpr int64_t kFaultStep = 3;
constexpr int64_t kGrowStep = 5;
constexpr int64_t kPad = 1 << 10;
constexpr int kVictimMember = 4;
constexpr int kVictimSpare = 3;

enum class Fault { kMemberEntering, kMemberInRebuild, kMemberAt, kSpareAt };

struct Scenario {
  std::string name;
  Fault fault;
  int ms = 0;  // kMemberAt, kSpareAt
};

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> s = {
      {"member_dies_entering_grow", Fault::kMemberEntering},
      {"member_dies_in_grow_rebuild", Fault::kMemberInRebuild}};
  for (int ms = 0; ms <= 20; ++ms) {
    s.push_back({absl::StrCat("member_dies_in_grow_at_", ms, "ms"),
                 Fault::kMemberAt, ms});
  }
  for (int ms = 0; ms <= 20; ++ms) {
    s.push_back({absl::StrCat("spare_dies_in_grow_at_", ms, "ms"),
                 Fault::kSpareAt, ms});
  }
  return s;
}

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

// A SIGKILL of this process `after` from Arm(), unless Disarm() came
// first: the kill and the disarm exclude each other, so a victim that
// disarmed never dies, and one that died never finished what came before
// its Disarm.
class Victim {
 public:
  void Arm(absl::Duration after) {
    if (armed_.exchange(true)) return;
    std::thread([this, after] {
      absl::SleepFor(after);
      std::lock_guard<std::mutex> lock(mu_);
      if (!disarmed_) raise(SIGKILL);
    }).detach();
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    disarmed_ = true;
  }
  bool armed() const { return armed_.load(); }

 private:
  std::atomic<bool> armed_{false};
  std::mutex mu_;
  bool disarmed_ = false;
};

// The store of a victim: arms its Victim at the first Set of a Grow's
// "ready/<rank>" answer (a spare entering the Grow), and SIGKILLs this
// process at its first MultiSet of a group key once `die_at_publish` is
// set (a member in the Grow's rebuild).
class VictimStore : public ForwardingStore {
 public:
  VictimStore(std::shared_ptr<Store> base, Victim* victim,
              std::optional<absl::Duration> arm_on_ready)
      : ForwardingStore(std::move(base)), victim_(victim),
        arm_on_ready_(arm_on_ready) {}
  std::atomic<bool> die_at_publish{false};

  absl::Status Set(absl::string_view k, absl::string_view v) override {
    absl::Status s = base()->Set(k, v);
    if (arm_on_ready_.has_value() && absl::StrContains(k, "/grow/") &&
        absl::StrContains(k, "/ready/")) {
      victim_->Arm(*arm_on_ready_);
    }
    return s;
  }
  absl::Status MultiSet(absl::Span<const std::string> k,
                        absl::Span<const std::string> v) override {
    if (die_at_publish.load() && !k.empty() &&
        absl::StartsWith(k[0], "devmesh/group/")) {
      raise(SIGKILL);
    }
    return base()->MultiSet(k, v);
  }

 private:
  Victim* victim_;
  std::optional<absl::Duration> arm_on_ready_;
};

MeshOptions Options() {
  MeshOptions options;
  options.all.backend = "gloo";
  // Past the run's limit: only a verdict ends a wait on a dead rank.
  options.all.timeout = absl::Seconds(120);
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

// The state a newcomer gets.
struct State {
  std::vector<float> params = std::vector<float>(elastic_example::kShard);
  int64_t done = 0;
  int64_t resumed = 0;  // the step the job resumed at after the first Shrink
};

std::string Table(const DeviceMesh& mesh) {
  return absl::StrCat("[", absl::StrJoin(mesh.layout().RankTable(), ","), "]");
}

pid_t SpawnSpare(int rank, int port, const std::string& dir, int die_ms,
                 size_t want) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "GROW_FAULT_SPARE=")) env.push_back(*e);
  }
  env.push_back(absl::StrCat("GROW_FAULT_SPARE=", rank, ",", port, ",", die_ms,
                             ",", want, ",", dir));
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

// One participant of the heal: a member (mesh set) or a spare (none).
struct Participant {
  std::shared_ptr<MeshRuntime> runtime;
  std::optional<DeviceMesh> mesh;
  State s;
  Victim* victim = nullptr;  // this process's, when it is the victim
  VictimStore* victim_store = nullptr;
  Fault fault = Fault::kMemberAt;
  int ms = 0;
  std::string log;  // this rank's results, one per line, for the parent
  // Rank 0 only: the spares it started (rank -> pid), restarted once they
  // die, and where to reach the store.
  std::map<int, pid_t>* spares = nullptr;
  int port = 0;
  std::string dir;
  size_t want = 0;  // ranks of the healed mesh
  bool removed = false;
};

void Log(Participant& p, const std::string& line) {
  absl::StrAppend(&p.log, line, "\n");
}

// Rank 0's launcher part: a spare that died is started again (no fault).
absl::Status Restart(Participant& p) {
  if (p.spares == nullptr) return absl::OkStatus();
  for (auto& [rank, pid] : *p.spares) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != pid) continue;
    RETURN_IF_ERROR(Expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                           absl::StrCat("spare ", rank, " ended with wait "
                                        "status ", status)));
    pid = SpawnSpare(rank, p.port, p.dir, -1, p.want);
    RETURN_IF_ERROR(Expect(pid > 0, "posix_spawn failed"));
  }
  return absl::OkStatus();
}

// After a failed Grow, broadcast or barrier: Shrink. Removed: the
// participant leaves the mesh (a spare waits again; a member is done).
absl::Status ShrinkStep(Participant& p, const absl::Status& why) {
  ShrinkOptions o;
  o.timeout = absl::Seconds(20);
  auto shrunk = p.mesh->Shrink("dp", o);
  if (!shrunk.ok()) {
    if (GetErrorInfo(shrunk.status()).removed_in_epoch >= 0) {
      Log(p, absl::StrCat("removed epoch ",
                          GetErrorInfo(shrunk.status()).removed_in_epoch));
      p.mesh.reset();
      p.removed = true;
      return absl::OkStatus();
    }
    return absl::InternalError(absl::StrCat("Shrink after '", why.ToString(),
                                            "': ", shrunk.status().ToString()));
  }
  p.mesh = shrunk->mesh;
  Log(p, absl::StrCat("shrunk epoch ", p.mesh->epoch(), " ", Table(*p.mesh)));
  return absl::OkStatus();
}

// Grow (or wait as a spare) until the mesh holds ranks 2 and 3 (the
// spares) and at least `want` ranks, with the state broadcast and both barriers passed on every
// member. Returns with p.mesh unset when this rank was removed and does not
// stay.
absl::Status Heal(Participant& p, size_t want, bool stay_when_removed) {
  const absl::Time end = absl::Now() + absl::Seconds(75);
  bool changed = false;
  for (;;) {
    RETURN_IF_ERROR(Expect(absl::Now() < end, "the heal took over 75 s"));
    RETURN_IF_ERROR(Restart(p));
    if (!p.mesh.has_value()) {
      if (p.removed && !stay_when_removed) return absl::OkStatus();
      SpareOptions o;
      o.timeout = end - absl::Now();
      auto joined = DeviceMesh::JoinAsSpare(p.runtime, o);
      if (!joined.ok()) {
        return absl::InternalError(absl::StrCat(
            "JoinAsSpare: ", joined.status().ToString()));
      }
      p.mesh = joined->mesh;
      p.removed = false;
      changed = true;
      Log(p, absl::StrCat(joined->report.shrunk_after.empty() ? "joined"
                                                              : "joined,shrunk",
                          " epoch ", p.mesh->epoch(), " ", Table(*p.mesh)));
    } else if (!changed) {
      if (p.mesh->layout().ContainsRank(2) && p.mesh->layout().ContainsRank(3) &&
          p.mesh->layout().numel() >= static_cast<int64_t>(want)) {
        return absl::OkStatus();
      }
      if (p.victim != nullptr) {
        if (p.fault == Fault::kMemberEntering) raise(SIGKILL);
        if (p.fault == Fault::kMemberInRebuild) {
          p.victim_store->die_at_publish.store(true);
        }
        if (p.fault == Fault::kMemberAt) {
          p.victim->Arm(absl::Milliseconds(p.ms));
        }
      }
      GrowOptions g;
      g.lease = absl::Seconds(1);  // margin for a loaded machine
      auto grown = p.mesh->Grow("dp", g);
      if (!grown.ok()) {
        const ErrorInfo info = GetErrorInfo(grown.status());
        if (info.removed_in_epoch >= 0) {
          Log(p, absl::StrCat("grow removed epoch ", info.removed_in_epoch));
          p.mesh.reset();
          p.removed = true;
          continue;
        }
        RETURN_IF_ERROR(Expect(
            absl::IsFailedPrecondition(grown.status()) && !info.fenced &&
                absl::StrContains(grown.status().message(),
                                  "call Shrink first, then Grow"),
            absl::StrCat("Grow: ", grown.status().ToString())));
        Log(p, absl::StrCat("grow error ", grown.status().message()));
        RETURN_IF_ERROR(ShrinkStep(p, grown.status()));
        changed = p.mesh.has_value();
        continue;
      }
      if (!grown->report.grown && grown->report.shrunk_after.empty()) {
        absl::SleepFor(absl::Milliseconds(20));  // spares not ready yet
        continue;
      }
      p.mesh = grown->mesh;
      changed = true;
      Log(p, absl::StrCat(grown->report.grown ? "grown" : "grown,shrunk",
                          " epoch ", p.mesh->epoch(), " ", Table(*p.mesh)));
      continue;
    }
    if (!p.mesh.has_value()) continue;
    // The state from replica 0, then a barrier along dp and along tp (a
    // death before them fails the barriers on every member: each row of
    // the mesh holds a member of the dead rank's column).
    const std::vector<StateBuffer> buffers = {
        StateBuffer::Of(absl::MakeSpan(p.s.params)),
        StateBuffer::Of(absl::MakeSpan(&p.s.done, 1)),
        StateBuffer::Of(absl::MakeSpan(&p.s.resumed, 1))};
    absl::Status st = BroadcastState(*p.mesh, "dp", buffers, 0, 8);
    if (st.ok() && p.victim != nullptr) p.victim->Disarm();
    for (const char* dim : {"dp", "tp"}) {
      if (!st.ok()) break;
      auto group = p.mesh->GetGroup(dim);
      st = group.ok() ? (*group)->Barrier() : group.status();
    }
    if (!st.ok()) {
      Log(p, "settle failed");
      RETURN_IF_ERROR(ShrinkStep(p, st));
      changed = p.mesh.has_value();
      continue;
    }
    changed = false;
  }
}

// Trains the healed mesh to the end; checks the parameters.
absl::Status Finish(Participant& p, int me) {
  const DeviceMesh& mesh = *p.mesh;
  const int64_t replicas = mesh.layout().shape()[0];
  ASSIGN_OR_RETURN(result, elastic_example::Train(
                               mesh, Training(p.s.done, p.s.params, kSteps)));
  RETURN_IF_ERROR(Expect(result.recoveries.empty() && result.steps == kSteps,
                         absl::StrCat("rank ", me, " after the heal: steps ",
                                      result.steps, ", ",
                                      result.recoveries.size(),
                                      " recoveries: ", result.last_error)));
  const std::vector<float> want =
      Reference(2, result.shard, kSteps,
                {{0, 3}, {p.s.resumed, 2}, {p.s.done, replicas}});
  RETURN_IF_ERROR(Expect(
      result.params == want,
      absl::StrCat("rank ", me, ": final parameters [",
                   absl::StrJoin(result.params, ","), "], want [",
                   absl::StrJoin(want, ","), "]")));
  Log(p, absl::StrCat("final epoch ", mesh.epoch(), " ", Table(mesh)));
  return absl::OkStatus();
}

size_t Want(Fault f) { return f == Fault::kSpareAt ? 6 : 4; }

// ---- The spare process -------------------------------------------------------

// GROW_FAULT_SPARE="<rank>,<port>,<die_ms>,<want>,<dir>": rank `rank` of
// the job whose store listens on 127.0.0.1:<port>; die_ms >= 0: SIGKILL
// itself die_ms after it first answers a Grow's call; the heal ends at
// `want` ranks. Writes its log to <dir>/spare_<rank>_<pid>.
int SpareMain(const std::string& spec) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::vector<std::string> f = absl::StrSplit(spec, absl::MaxSplits(',', 4));
  int me = 0, port = 0, die_ms = -1;
  size_t want = 0;
  if (f.size() != 5 || !absl::SimpleAtoi(f[0], &me) ||
      !absl::SimpleAtoi(f[1], &port) || !absl::SimpleAtoi(f[2], &die_ms) ||
      !absl::SimpleAtoi(f[3], &want)) {
    std::fprintf(stderr, "[spare] bad GROW_FAULT_SPARE '%s'\n", spec.c_str());
    return 2;
  }
  Victim victim;
  Participant p;
  p.fault = Fault::kSpareAt;
  auto run = [&]() -> absl::Status {
    TcpStoreClientOptions o;
    o.port = port;
    o.connect_timeout = absl::Seconds(10);
    ASSIGN_OR_RETURN(client, TcpStoreClient::Connect(o));
    std::shared_ptr<Store> store(std::move(client));
    if (die_ms >= 0) {
      auto vs = std::make_shared<VictimStore>(store, &victim,
                                              absl::Milliseconds(die_ms));
      p.victim = &victim;
      p.victim_store = vs.get();
      store = vs;
    }
    ASSIGN_OR_RETURN(runtime, MeshRuntime::Create(store, me, kRanks, me));
    p.runtime = runtime;
    RETURN_IF_ERROR(Heal(p, want, true));
    return Finish(p, me);
  };
  absl::Status s = run();
  WriteFile(absl::StrCat(f[4], "/spare_", me, "_", getpid()),
            absl::StrCat(p.log, s.ok() ? "ok" : s.ToString(), "\n"));
  if (!s.ok()) {
    std::fprintf(stderr, "[spare %d] %s\n", me, s.ToString().c_str());
    return 1;
  }
  return 0;
}

// ---- One launch ----------------------------------------------------------------

absl::Status Rank(Bootstrap& b, const Scenario& sc, const std::string& dir) {
  const int me = b.rank();
  const int port = b.info().store_port;
  Victim victim;
  Participant p;
  p.fault = sc.fault;
  p.ms = sc.ms;
  std::shared_ptr<Store> store = b.store();
  const bool member_fault = sc.fault != Fault::kSpareAt;
  if (member_fault && me == kVictimMember) {
    auto vs = std::make_shared<VictimStore>(store, &victim, std::nullopt);
    p.victim = &victim;
    p.victim_store = vs.get();
    store = vs;
  }
  ASSIGN_OR_RETURN(runtime, MeshRuntime::Create(store, me, b.world_size(),
                                                b.local_rank()));
  p.runtime = runtime;
  ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {3, 2}, {"dp", "tp"},
                                        Options()));
  WriteFile(absl::StrCat(dir, "/pid_", me), absl::StrCat(getpid()));
  // Replica 1 (ranks 2 and 3) dies at kFaultStep: rank 2 stops rank 3,
  // kills it, then itself.
  auto hook = [&](Point pt, int64_t step, int64_t epoch) {
    if (epoch != 0 || step != kFaultStep || me != 2 ||
        pt != Point::kBeforeShardAllReduce) {
      return;
    }
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
    raise(SIGKILL);
  };
  ASSIGN_OR_RETURN(first, elastic_example::Train(
                              mesh, Training(0, {}, kGrowStep), hook));
  RETURN_IF_ERROR(Expect(
      first.left_because.empty() && first.recoveries.size() == 1 &&
          first.steps == kGrowStep && first.mesh.has_value() &&
          first.mesh->epoch() == 1,
      absl::StrCat("rank ", me, " before the Grow: steps ", first.steps,
                   ", recoveries ", first.recoveries.size(), ", left '",
                   first.left_because, "', last error ", first.last_error)));
  p.mesh = *first.mesh;
  p.s.params = first.params;
  p.s.done = first.steps;
  p.s.resumed = first.recoveries[0].resumed_step;
  struct WriteLog {
    const std::string path;
    Participant& p;
    absl::Status status = absl::InternalError("returned early");
    ~WriteLog() {
      WriteFile(path, absl::StrCat(p.log, status.ok() ? "ok" : status.ToString(),
                                   "\n"));
    }
  } write_log{absl::StrCat(dir, "/rank_", me), p};
  std::map<int, pid_t> spares;
  struct ReapAll {
    std::map<int, pid_t>& pids;
    ~ReapAll() {
      for (auto& [r, pid] : pids) {
        if (pid <= 0) continue;
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reap_all{spares};
  if (me == 0) {
    for (int r : {2, 3}) {
      const int die = !member_fault && r == kVictimSpare ? sc.ms : -1;
      const pid_t pid = SpawnSpare(r, port, dir, die, Want(sc.fault));
      RETURN_IF_ERROR(Expect(pid > 0, "posix_spawn failed"));
      spares[r] = pid;
    }
    p.spares = &spares;
    p.port = port;
    p.dir = dir;
    p.want = Want(sc.fault);
  }
  // Every member calls Grow once both spares registered (so that the first
  // Grow admits them): rank 0 waits for them, then a barrier on each dim.
  if (me == 0) {
    const absl::Time until = absl::Now() + absl::Seconds(30);
    for (;;) {
      auto n = b.store()->Add("devmesh/epoch/1/spares", 0);
      if (n.ok() && *n >= 2) break;
      RETURN_IF_ERROR(Expect(absl::Now() < until, "the spares never "
                                                  "registered"));
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  for (const char* dim : {"dp", "tp"}) {
    ASSIGN_OR_RETURN(group, p.mesh->GetGroup(dim));
    // A member that passed its barriers may die entering the Grow while
    // this rank is still in one: the verdict aborts it here (Unavailable
    // naming the dead rank). The heal's Grow then fails on the verdict
    // alike on every member and shrinks, so go on to it (unlogged: ranks 0
    // and 1 must see the same sequence of results).
    absl::Status barrier = group->Barrier();
    if (barrier.ok()) continue;
    RETURN_IF_ERROR(Expect(absl::IsUnavailable(barrier) &&
                               GetErrorInfo(barrier).peer == 4,
                           absl::StrCat("barrier on ", dim, " before the "
                                        "heal: ", barrier.ToString())));
    break;
  }
  const absl::Time heal_start = absl::Now();
  write_log.status = Heal(p, Want(sc.fault), sc.fault == Fault::kSpareAt);
  RETURN_IF_ERROR(write_log.status);
  if (me == 0) {
    WriteFile(absl::StrCat(dir, "/heal"),
              absl::StrCat(absl::ToInt64Microseconds(absl::Now() - heal_start)));
  }
  write_log.status = p.mesh.has_value() ? Finish(p, me) : absl::OkStatus();
  RETURN_IF_ERROR(write_log.status);
  for (auto& [r, pid] : spares) {
    const absl::Time end = absl::Now() + absl::Seconds(30);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      RETURN_IF_ERROR(Expect(absl::Now() < end,
                             absl::StrCat("spare ", r, " did not end")));
      absl::SleepFor(absl::Milliseconds(10));
    }
    pid = 0;
    RETURN_IF_ERROR(Expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                           absl::StrCat("spare ", r, " (pid ", pid,
                                        ") ended with wait status ", status)));
  }
  spares.clear();
  return absl::OkStatus();
}

// The last "final ..." line of a log, or "".
std::string FinalOf(const std::string& log) {
  std::string out;
  for (absl::string_view l : absl::StrSplit(log, '\n')) {
    if (absl::StartsWith(l, "final ")) out = std::string(l);
  }
  return out;
}

class GrowFaultTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(GrowFaultTest, EveryoneEndsAlike) {
  const Scenario& sc = GetParam();
  const int runs = absl::GetFlag(FLAGS_grow_fault_runs);
  int failures = 0;
  std::map<std::string, int> outcomes;
  absl::Duration slowest;
  int64_t heal_max_us = 0;
  for (int run = 0; run < runs; ++run) {
    const std::string dir = absl::StrCat(
        std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp",
        "/grow_fault_", sc.name, "_", run, "_", getpid());
    ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '",
                                       dir, "'").c_str()),
              0);
    RunRanksOptions options;
    options.timeout = absl::Seconds(90);
    const absl::Time start = absl::Now();
    std::vector<RankOutcome> out = RunRanksDetailed(
        kRanks, [&](Bootstrap& b) { return Rank(b, sc, dir); }, options);
    slowest = std::max(slowest, absl::Now() - start);
    bool ok = out.size() == kRanks;
    auto fail = [&](const std::string& why) {
      ok = false;
      ADD_FAILURE() << sc.name << " run " << run << ": " << why;
    };
    if (waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD) {
      fail("a child process is left after the run");
    }
    const bool member_fault = sc.fault != Fault::kSpareAt;
    bool victim_died = false;
    for (const RankOutcome& o : out) {
      if (o.rank == 2 || o.rank == 3) {
        if (o.reported) fail(absl::StrCat("rank ", o.rank, " was not killed"));
        continue;
      }
      if (member_fault && o.rank == kVictimMember && !o.reported) {
        victim_died = true;
        continue;
      }
      if (!o.reported || !o.status.ok()) {
        fail(absl::StrCat("rank ", o.rank, ": ", o.status.ToString(),
                          " (exit ", o.exit_code, ")"));
      }
    }
    // Every finishing process (members and spares) ends alike.
    std::map<std::string, std::string> finals;  // who -> final line
    std::map<std::string, std::string> logs;
    for (int r : {0, 1, 4, 5}) {
      const std::string log = ReadFile(absl::StrCat(dir, "/rank_", r));
      logs[absl::StrCat("rank ", r)] = log;
      if (!FinalOf(log).empty()) finals[absl::StrCat("rank ", r)] = FinalOf(log);
    }
    std::string cmd = absl::StrCat("ls '", dir, "'");
    for (const std::string& f : [&] {
           std::vector<std::string> names;
           FILE* ls = popen(cmd.c_str(), "r");
           char buf[256];
           while (ls != nullptr && fgets(buf, sizeof buf, ls) != nullptr) {
             std::string n(buf);
             while (!n.empty() && n.back() == '\n') n.pop_back();
             names.push_back(n);
           }
           if (ls != nullptr) pclose(ls);
           return names;
         }()) {
      if (!absl::StartsWith(f, "spare_")) continue;
      const std::string log = ReadFile(absl::StrCat(dir, "/", f));
      logs[f] = log;
      if (!FinalOf(log).empty()) finals[f] = FinalOf(log);
    }
    std::set<std::string> distinct;
    for (auto& [who, line] : finals) distinct.insert(line);
    std::string outcome = distinct.size() == 1 ? *distinct.begin() : "";
    const std::set<std::string> allowed =
        member_fault
            ? std::set<std::string>{"final epoch 3 [0,1,2,3]",
                                    "final epoch 2 [0,1,4,5,2,3]"}
            : std::set<std::string>{"final epoch 4 [0,1,4,5,2,3]",
                                    "final epoch 2 [0,1,4,5,2,3]"};
    if (distinct.size() != 1 || !allowed.count(outcome)) {
      std::string all;
      for (auto& [who, line] : finals) absl::StrAppend(&all, who, ": ", line, "; ");
      fail(absl::StrCat("the processes did not end alike or as allowed: ",
                        all));
    }
    // Who finished: members 0 and 1 always, both admitted spares; rank 5
    // (removed) and the victim only when no Shrink removed them.
    const bool shrank = outcome == "final epoch 3 [0,1,2,3]" ||
                        outcome == "final epoch 4 [0,1,4,5,2,3]";
    const size_t want_finals = outcome == "final epoch 3 [0,1,2,3]" ? 4 : 6;
    if (finals.size() != want_finals) {
      fail(absl::StrCat(finals.size(), " processes finished, want ",
                        want_finals));
    }
    if (member_fault && victim_died != (outcome == "final epoch 3 [0,1,2,3]")) {
      fail(absl::StrCat("victim died: ", victim_died, ", outcome ", outcome));
    }
    if (logs["rank 0"] != logs["rank 1"]) {
      fail(absl::StrCat("ranks 0 and 1 saw different results:\n",
                        logs["rank 0"], "---\n", logs["rank 1"]));
    }
    if (sc.fault == Fault::kMemberEntering &&
        !absl::StartsWith(logs["rank 0"], "grow error Grow of epoch 1: ")) {
      fail(absl::StrCat("rank 0's first result: ", logs["rank 0"]));
    }
    if (sc.fault == Fault::kMemberInRebuild &&
        !absl::StartsWith(logs["rank 0"],
                          "grown,shrunk epoch 3 [0,1,2,3]\n")) {
      fail(absl::StrCat("rank 0's first result: ", logs["rank 0"]));
    }
    int64_t heal = 0;
    if (absl::SimpleAtoi(ReadFile(absl::StrCat(dir, "/heal")), &heal)) {
      heal_max_us = std::max(heal_max_us, heal);
    }
    ++outcomes[!ok ? "failed" : shrank ? "died" : "finished_first"];
    if (!ok) {
      ++failures;
      for (auto& [who, log] : logs) {
        std::fprintf(stderr, "%s:\n%s", who.c_str(), log.c_str());
      }
    }
  }
  std::printf("%-30s launches %d failures %d died %d finished_first %d "
              "slowest %s heal max %s\n",
              sc.name.c_str(), runs, failures, outcomes["died"],
              outcomes["finished_first"],
              absl::FormatDuration(absl::Trunc(slowest, absl::Milliseconds(1)))
                  .c_str(),
              absl::FormatDuration(absl::Microseconds(heal_max_us)).c_str());
  std::fflush(stdout);
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Faults, GrowFaultTest,
                         ::testing::ValuesIn(Scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  if (const char* spec = std::getenv("GROW_FAULT_SPARE")) {
    return devmesh::SpareMain(spec);
  }
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
