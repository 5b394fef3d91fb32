// devmesh/device_mesh/failure_watch.cc
#include "device_mesh/failure_watch.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bootstrap/bootstrap.h"
#include "comm/communicator.h"
#include "device_mesh/epoch_agreement.h"
#include "device_mesh/liveness_beacon.h"
#include "device_mesh/rank_liveness.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace {

std::string FencedText(int rank, const std::string& verdict) {
  return absl::StrCat(
      "global rank ", rank,
      " (this rank) is fenced out of the job: the others declared it dead (",
      verdict,
      ") and went on without it; it must not take part in a collective again "
      "(exit, or start over as a new job)");
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The state (field 3), whether it is exiting (PF_EXITING, 0x4, in the flags
// of field 9: set as soon as the kernel starts tearing the process down,
// before its sockets close) and the start time in clock ticks since boot
// (field 22) of /proc/<pid>/stat; false when there is no such process.
bool ProcStat(const std::string& pid, char* state, bool* exiting,
              std::string* start) {
  const std::string stat = ReadFirstLine(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');  // the command may hold spaces
  if (paren == std::string::npos) return false;
  std::vector<std::string> f =
      absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state), f[6] field 9 (flags), f[19] field 22.
  uint64_t flags = 0;
  if (f.size() < 20 || f[0].empty() || !absl::SimpleAtoi(f[6], &flags)) {
    return false;
  }
  *state = f[0][0];
  *exiting = (flags & 0x4) != 0;
  *start = f[19];
  return true;
}

// Where this process can be found again: "<boot id>|<pid namespace
// inode>|<pid>|<start time>".
std::string SelfProcInfo() {
  struct stat ns;
  const std::string ns_ino =
      stat("/proc/self/ns/pid", &ns) == 0 ? absl::StrCat(ns.st_ino) : "";
  char state = 0;
  bool exiting = false;
  std::string start;
  const std::string pid = absl::StrCat(getpid());
  if (!ProcStat(pid, &state, &exiting, &start)) start = "";
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), "|",
                      ns_ino, "|", pid, "|", start);
}

// The network namespace of this process ("" when unreadable): a loopback
// beacon is reachable only from it.
std::string SelfNetNamespace() {
  struct stat ns;
  return stat("/proc/self/ns/net", &ns) == 0 ? absl::StrCat(ns.st_ino) : "";
}

// SelfProcInfo with this process's liveness beacon (liveness_beacon.h) at
// `host`: "...|<net namespace inode>|<host>|<port>|<nonce>"; SelfProcInfo
// alone when the beacon could not listen.
std::string SelfProcInfoWithBeacon(const std::string& host) {
  const device_mesh_internal::BeaconInfo beacon =
      device_mesh_internal::StartBeacon();
  if (beacon.port == 0) return SelfProcInfo();
  return absl::StrCat(SelfProcInfo(), "|", SelfNetNamespace(), "|",
                      host.empty() ? "127.0.0.1" : host, "|", beacon.port, "|",
                      beacon.nonce);
}

// What this kernel says of the process `info` (another rank's SelfProcInfo,
// perhaps with its beacon) names.
enum class Liveness {
  kNotHere,  // not of this kernel and PID namespace, or unreadable
  kGone,     // no such process, a zombie, exiting, or another process now
             // under its PID
  kStopped,  // alive but stopped (SIGSTOP: 'T') or traced ('t')
  kRunning,  // alive and running, runnable or waiting ('R', 'S', 'D', ...)
};

Liveness ProcessLiveness(const std::string& self, const std::string& info) {
  std::vector<std::string> mine = absl::StrSplit(self, '|');
  std::vector<std::string> theirs = absl::StrSplit(info, '|');
  if (mine.size() < 4 || theirs.size() < 4 || mine[0].empty() ||
      mine[1].empty() || theirs[3].empty() || mine[0] != theirs[0] ||
      mine[1] != theirs[1]) {
    return Liveness::kNotHere;
  }
  // Gone: no /proc entry at all. An entry that cannot be read (hidepid,
  // say) tells nothing.
  struct stat entry;
  if (stat(absl::StrCat("/proc/", theirs[2]).c_str(), &entry) != 0) {
    return errno == ENOENT ? Liveness::kGone : Liveness::kNotHere;
  }
  char state = 0;
  bool exiting = false;
  std::string start;
  if (!ProcStat(theirs[2], &state, &exiting, &start)) {
    return Liveness::kNotHere;
  }
  if (start != theirs[3] || exiting || state == 'Z' || state == 'X') {
    return Liveness::kGone;
  }
  return state == 'T' || state == 't' ? Liveness::kStopped
                                      : Liveness::kRunning;
}

}  // namespace

std::string EncodeVerdict(const Verdict& verdict) {
  return absl::StrCat(verdict.rank, "\n", verdict.text);
}

Verdict DecodeVerdict(absl::string_view stored) {
  Verdict out;
  const size_t newline = stored.find('\n');
  if (newline == absl::string_view::npos ||
      !absl::SimpleAtoi(stored.substr(0, newline), &out.rank)) {
    out.rank = -1;
    out.text = std::string(stored);
    return out;
  }
  out.text = std::string(stored.substr(newline + 1));
  return out;
}

std::string FailureWatch::LeaseKey(int rank) {
  return device_mesh_internal::LeaseKeyOf(rank);
}

std::string FailureWatch::LeftKey(int rank) {
  return absl::StrCat("devmesh/job/left/", rank);
}

std::string FailureWatch::ProcKey(int rank) {
  return device_mesh_internal::ProcKeyOf(rank);
}

std::string FailureWatch::ProcessIdentity(const std::string& beacon_host) {
  return SelfProcInfoWithBeacon(beacon_host);
}

std::string FailureWatch::EpochKey(int64_t epoch, absl::string_view what) {
  return absl::StrCat("devmesh/epoch/", epoch, "/", what);
}

struct FailureWatch::State {
  std::shared_ptr<Store> store;
  int rank = 0;
  absl::Duration period;
  absl::Duration silence;
  // This rank's lease and its judge of others' (counter or etcd lease), set
  // at Start before the thread.
  std::unique_ptr<device_mesh_internal::RankLiveness> liveness;
  std::atomic<bool> stop{false};
  mutable sync_internal::Mutex mu;
  int world_size = 0;  // the job's, set at Start before the thread
  int64_t epoch ABSL_GUARDED_BY(mu) = 0;
  std::vector<int> members ABSL_GUARDED_BY(mu);  // the epoch's, sorted
  std::string verdict ABSL_GUARDED_BY(mu);       // the epoch's death, "" before
  int verdict_rank ABSL_GUARDED_BY(mu) = -1;
  absl::Time verdict_time ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  // Signalled when a verdict is learnt, this rank is fenced, or the watch
  // stops (WaitForVerdict).
  sync_internal::CondVar verdict_cv;
  // Why this rank is fenced, "" when it is not.
  std::string fenced ABSL_GUARDED_BY(mu);
  std::string store_note ABSL_GUARDED_BY(mu);  // the store's last trouble
  std::vector<std::weak_ptr<WatchedGroup>> groups ABSL_GUARDED_BY(mu);
  // Subscribe's: told after `groups`, so that a subscriber that calls
  // Shrink at once finds every group already told.
  std::vector<std::weak_ptr<WatchedGroup>> subscribers ABSL_GUARDED_BY(mu);
  // Verdicts or fences whose groups are being told now: waiters and new
  // subscribers hear of one only once its groups were told.
  int telling ABSL_GUARDED_BY(mu) = 0;
  // This process's identity with its beacon (SelfProcInfoWithBeacon), set
  // at Start before the thread.
  std::string self_proc;
  // Other ranks' identities (ProcKey's values).
  std::map<int, std::string> procs ABSL_GUARDED_BY(mu);
  // Probes of the beacons of members on other hosts (or this kernel's other
  // namespaces), at most kMaxProbes; those that said gone.
  static constexpr size_t kMaxProbes = 64;
  sync_internal::Mutex beacon_mu;
  std::map<int, std::unique_ptr<device_mesh_internal::BeaconProbe>> probes
      ABSL_GUARDED_BY(beacon_mu);
  std::map<int, std::string> beacon_gone ABSL_GUARDED_BY(beacon_mu);
  // JudgeGoneMembers' readings of the leases of members on other hosts, in
  // epoch `judged_epoch`: the reading, when it was first seen (the last
  // sign of life), and when it was last read.
  struct LeaseSeen {
    device_mesh_internal::LeaseReading reading;
    absl::Time since;
    absl::Time read_at;
  };
  std::map<int, LeaseSeen> judged ABSL_GUARDED_BY(mu);
  int64_t judged_epoch ABSL_GUARDED_BY(mu) = -1;

  // Whether `peer`'s process identity was read (Live): its watch started,
  // so its lease did (Start renews before it publishes the identity).
  bool Known(int peer) const {
    sync_internal::MutexLock lock(&mu);
    return procs.count(peer) > 0;
  }

  // What this kernel says of `peer`'s process (ProcessLiveness); its info
  // is read from the store once.
  Liveness Live(int peer) {
    std::string info;
    {
      sync_internal::MutexLock lock(&mu);
      auto it = procs.find(peer);
      if (it != procs.end()) info = it->second;
    }
    if (info.empty()) {
      // Published when the peer's watch started; not waited for when absent.
      auto there = store->Check({ProcKey(peer)});
      if (!there.ok() || !*there) return Liveness::kNotHere;
      auto v = store->Get(ProcKey(peer), absl::Seconds(5));
      if (!v.ok()) return Liveness::kNotHere;
      info = *v;
      sync_internal::MutexLock lock(&mu);
      procs[peer] = info;
    }
    const Liveness here = ProcessLiveness(self_proc, info);
    if (here == Liveness::kNotHere && BeaconGone(peer, info)) {
      return Liveness::kGone;
    }
    return here;
  }

  // Whether `peer`'s beacon (in its identity `info`) says its process is
  // gone: its listener refused a connection (liveness_beacon.h). Polls its
  // probe, made on the first call (none past kMaxProbes).
  bool BeaconGone(int peer, const std::string& info) {
    std::vector<std::string> theirs = absl::StrSplit(info, '|');
    std::vector<std::string> mine = absl::StrSplit(self_proc, '|');
    int port = 0;
    uint64_t nonce = 0;
    if (theirs.size() < 8 || !absl::SimpleAtoi(theirs[6], &port) ||
        !absl::SimpleAtoi(theirs[7], &nonce)) {
      return false;
    }
    sync_internal::MutexLock lock(&beacon_mu);
    auto it = probes.find(peer);
    if (it == probes.end()) {
      if (probes.size() >= kMaxProbes) return false;
      // A refusal at loopback says something only from the peer's own
      // kernel and network namespace; elsewhere the address is the one the
      // peer's groups are reached at (its host's), unless it is this
      // process's own address too (containers behind NAT on two hosts with
      // the same private address): then only a greeting first makes it
      // count.
      const bool same_net_here = mine.size() >= 5 && mine[0] == theirs[0] &&
                                 mine[4] == theirs[4] && !mine[4].empty();
      const bool credible =
          same_net_here ||
          (!device_mesh_internal::IsLoopbackIPv4(theirs[5]) &&
           (mine.size() < 6 || mine[5] != theirs[5]));
      it = probes
               .emplace(peer, std::make_unique<device_mesh_internal::BeaconProbe>(
                                  theirs[5], port, nonce, credible))
               .first;
    }
    if (it->second->Poll() != device_mesh_internal::BeaconState::kGone) {
      return false;
    }
    beacon_gone.emplace(peer, theirs[5]);
    return true;
  }

  // Drops the probes of ranks not in `members`, and of `renewed` (ranks
  // whose process may be new).
  void DropProbes(const std::vector<int>& members,
                  const std::vector<int>& renewed) {
    sync_internal::MutexLock lock(&beacon_mu);
    for (auto it = probes.begin(); it != probes.end();) {
      const int r = it->first;
      if (!std::binary_search(members.begin(), members.end(), r) ||
          std::find(renewed.begin(), renewed.end(), r) != renewed.end()) {
        beacon_gone.erase(r);
        it = probes.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Whether `peer`'s process is gone, seen from this kernel.
  bool Gone(int peer) { return Live(peer) == Liveness::kGone; }

  // "global rank <peer> died (its lease was not renewed for <silent><what>;
  // first reported by global rank <rank>)".
  std::string LeaseText(int peer, absl::Duration silent,
                        absl::string_view what = "") const {
    return absl::StrCat("global rank ", peer,
                        " died (its lease was not renewed for ",
                        absl::FormatDuration(silent), what,
                        liveness->lapse_note(),
                        "; first reported by global rank ", rank, ")");
  }

  // The verdict on `peer`, whose lease lapsed (`lapse`), as this kernel
  // sees its process (`live`).
  std::string SilenceText(int peer, Liveness live,
                          const device_mesh_internal::Lapse& lapse) {
    if (live == Liveness::kGone) return GoneText(peer);
    const auto ms = [](absl::Duration d) {
      return absl::Trunc(d, absl::Milliseconds(1));
    };
    return LeaseText(
        peer, ms(lapse.wall),
        live == Liveness::kStopped
            ? "; its process on this host is stopped"
        : live == Liveness::kRunning
            ? absl::StrCat(" although its process on this host runs, ",
                           absl::FormatDuration(ms(lapse.answered)),
                           " of it while the store answered global rank ",
                           rank)
            : "");
  }

  std::string GoneText(int peer) {
    std::string host;
    {
      sync_internal::MutexLock lock(&beacon_mu);
      auto it = beacon_gone.find(peer);
      if (it != beacon_gone.end()) host = it->second;
    }
    if (!host.empty()) {
      return absl::StrCat("global rank ", peer,
                          " died (its process is gone: its liveness port on ",
                          host, " refused a connection; first reported by "
                          "global rank ", rank, ")");
    }
    return absl::StrCat("global rank ", peer,
                        " died (its process on this host is gone; first "
                        "reported by global rank ", rank, ")");
  }

  // The registered groups still alive.
  // The registered groups still alive.
  std::vector<std::shared_ptr<WatchedGroup>> LiveGroupsLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return Live(groups);
  }
  static std::vector<std::shared_ptr<WatchedGroup>> Live(
      const std::vector<std::weak_ptr<WatchedGroup>>& list) {
    std::vector<std::shared_ptr<WatchedGroup>> live;
    for (const auto& weak : list) {
      if (auto g = weak.lock()) live.push_back(std::move(g));
    }
    return live;
  }

  // Tells `live` (the groups, snapshot under mu with `telling` raised),
  // then, once no group is being told, the subscribers, then the waiters.
  void Tell(const std::vector<std::shared_ptr<WatchedGroup>>& live, int dead,
            const std::string& text, bool fenced_here) ABSL_LOCKS_EXCLUDED(mu) {
    for (auto& g : live) g->OnVerdict(dead, text, fenced_here);
    std::vector<std::shared_ptr<WatchedGroup>> subs;
    {
      sync_internal::MutexLock lock(&mu);
      --telling;
      if (telling == 0) subs = Live(subscribers);
    }
    for (auto& s : subs) s->OnVerdict(dead, text, fenced_here);
    verdict_cv.SignalAll();
  }

  // Publishes `text` on `dead` as `at_epoch`'s verdict with CompareSet and
  // acts on the verdict the store then holds (the first publisher's); false,
  // acting on nothing, when the store did not answer.
  bool Publish(int64_t at_epoch, int dead, const std::string& text) {
    auto won = store->CompareSet(EpochKey(at_epoch, "death"), "",
                                 EncodeVerdict(Verdict{dead, text}));
    if (!won.ok()) return false;
    Decide(at_epoch, *won);
    return true;
  }

  // Whether `peer` ended its runtime (it left; it did not die).
  bool Left(int peer) const {
    auto left = store->Check({LeftKey(peer)});
    return left.ok() && *left;
  }

  // Records `stored` (EncodeVerdict's) as `at_epoch`'s verdict (first one
  // wins; ignored when the epoch moved on) and tells every registered group.
  void Decide(int64_t at_epoch, const std::string& stored) {
    std::vector<std::shared_ptr<WatchedGroup>> live;
    const Verdict decoded = DecodeVerdict(stored);
    const int dead = decoded.rank;
    const std::string& text = decoded.text;
    bool self = false;
    {
      sync_internal::MutexLock lock(&mu);
      if (at_epoch != epoch || !verdict.empty()) return;
      verdict = text;
      verdict_rank = dead;
      verdict_time = absl::Now();
      self = dead == rank;
      if (self && fenced.empty()) fenced = FencedText(rank, text);
      live = LiveGroupsLocked();
      ++telling;
    }
    Tell(live, dead, text, self);
    // The dead rank will not leave by itself: count it as left, so that
    // rank 0's Bootstrap::Leave waits only for the living (idempotent, one
    // count whoever of the survivors comes first).
    if (dead >= 0 && !self) (void)CountAsLeft(*store, dead, world_size);
  }

  void FenceWith(const std::string& why) {
    std::vector<std::shared_ptr<WatchedGroup>> live;
    std::string text;
    int dead = -1;
    {
      sync_internal::MutexLock lock(&mu);
      if (fenced.empty()) fenced = why;
      text = verdict.empty() ? why : verdict;
      dead = verdict.empty() ? rank : verdict_rank;
      live = LiveGroupsLocked();
      ++telling;
    }
    Tell(live, dead, text, /*fenced_here=*/true);
  }

  void Run() {
    Loop();
    // A rank that ends its runtime left; it did not die (Explain reads
    // this). Here, on the detached thread, so that a store that is gone
    // never holds up the process's exit. Then its lease ends (etcd:
    // revoked), after the mark, so that no watcher takes it for a death.
    (void)store->Set(LeftKey(rank), "1");
    liveness->End();
  }

  // The successor of this rank among `m` (sorted), -1 when alone.
  int Successor(const std::vector<int>& m) const {
    if (m.size() < 2) return -1;
    auto it = std::upper_bound(m.begin(), m.end(), rank);
    return it == m.end() ? m.front() : *it;
  }

  void Loop() {
    // A lease silent this long is a death even for a successor whose
    // process this kernel shows running; counted only while the store
    // answered this rank's own lease calls in time (Lapse::answered): a
    // store that serves no one's lease is no evidence against the successor.
    const absl::Duration hard_limit =
        std::max(absl::Seconds(30), 4 * silence);
    while (!stop.load()) {
      const absl::Time start = absl::Now();
      int64_t at_epoch;
      int successor;
      bool has_verdict;
      {
        sync_internal::MutexLock lock(&mu);
        at_epoch = epoch;
        successor = Successor(members);
        has_verdict = !verdict.empty();
      }
      absl::Status renewed = liveness->Renew();
      if (successor >= 0 && !has_verdict && renewed.ok()) {
        // The successor's lease, as the liveness judges it (counter: not
        // advanced for the silence; etcd: its lease expired).
        if (const std::optional<device_mesh_internal::Lapse> lapse =
                liveness->Lapsed(successor)) {
          // A lease that started and then stopped: dead, unless it left,
          // or this kernel shows its process running (slow, not dead)
          // before the hard limit. Acted on only once it is in the store
          // (Publish), so no rank acts on a verdict the others cannot see.
          const Liveness live = Live(successor);
          if ((live != Liveness::kRunning || lapse->answered >= hard_limit) &&
              !Left(successor)) {
            (void)Publish(at_epoch, successor,
                          SilenceText(successor, live, *lapse));
          }
        }
      }
      auto death = store->Get(EpochKey(at_epoch, "death"), period);
      if (stop.load()) return;
      if (death.ok()) Decide(at_epoch, *death);
      const absl::Status trouble =
          !renewed.ok() ? renewed
          : (death.ok() || absl::IsDeadlineExceeded(death.status()) ||
             absl::IsNotFound(death.status()))
              ? absl::OkStatus()
              : death.status();
      {
        // Noted for Explain, without aborting anything (a rank 0 that hosts
        // the store may end first while groups that no longer need it
        // finish), and the lease goes on being renewed should it come back.
        sync_internal::MutexLock lock(&mu);
        store_note = trouble.ok() ? "" : trouble.ToString();
      }
      // Never faster than one round per period, whatever the store answers,
      // but at once when the epoch moved on meanwhile (AdvanceEpoch signals
      // verdict_cv): a verdict of the new epoch that another rank publishes
      // is then learnt at once, not up to a period later.
      sync_internal::MutexLock lock(&mu);
      const absl::Time next = start + period;
      while (!stop.load() && epoch == at_epoch && absl::Now() < next) {
        verdict_cv.WaitWithDeadline(&mu, next);
      }
    }
  }
};

std::shared_ptr<FailureWatch> FailureWatch::Start(std::shared_ptr<Store> store,
                                                  int rank, int world_size,
                                                  absl::Duration period,
                                                  absl::Duration silence,
                                                  int64_t epoch,
                                                  std::vector<int> members,
                                                  std::string beacon_host) {
  auto state = std::make_shared<State>();
  state->self_proc = SelfProcInfoWithBeacon(beacon_host);
  state->store = std::move(store);
  state->rank = rank;
  state->world_size = world_size;
  state->period = period;
  state->silence = std::max(silence, period * 2);
  {
    sync_internal::MutexLock lock(&state->mu);  // not shared yet
    state->epoch = epoch;
    state->members = std::move(members);
    if (state->members.empty()) {
      for (int r = 0; r < world_size; ++r) state->members.push_back(r);
    }
  }
  state->liveness = device_mesh_internal::MakeRankLiveness(
      state->store, rank, period, state->silence);
  // Before the thread: a rank that dies right after this returns has a
  // lease that started (a watcher judges only started leases) and a process
  // its watcher can look up, whenever the thread would first have run. The
  // lease first: a published process means a started lease (the etcd
  // liveness relies on it).
  (void)state->liveness->Renew();
  (void)state->store->Set(ProcKey(rank), state->self_proc);
  std::thread([state] { state->Run(); }).detach();
  return std::shared_ptr<FailureWatch>(new FailureWatch(state));
}

FailureWatch::~FailureWatch() {
  {
    sync_internal::MutexLock lock(&state_->mu);
    state_->stop.store(true);
  }
  state_->verdict_cv.SignalAll();
  // Leave now: the thread would mark it only after its parked Get, and a
  // process that exits at once would never be marked, so its watcher would
  // call it dead. Then the lease ends (etcd: revoked, its key deleted at
  // once), after the mark. Bounded: a store that does not answer delays this
  // by at most 500 ms (the calls then finish, or not, on their own thread;
  // an unrevoked etcd lease expires by itself, the mark already set).
  auto state = state_;
  auto left = std::make_shared<std::promise<void>>();
  std::future<void> done = left->get_future();
  std::thread([state, left] {
    (void)state->store->Set(LeftKey(state->rank), "1");
    state->liveness->End();
    left->set_value();
  }).detach();
  done.wait_for(std::chrono::milliseconds(500));
}

void FailureWatch::Register(std::weak_ptr<WatchedGroup> group) {
  std::shared_ptr<WatchedGroup> late;
  std::string text;
  int dead = -1;
  bool self = false;
  {
    sync_internal::MutexLock lock(&state_->mu);
    auto& groups = state_->groups;
    groups.erase(std::remove_if(groups.begin(), groups.end(),
                                [](const std::weak_ptr<WatchedGroup>& w) {
                                  return w.expired();
                                }),
                 groups.end());
    groups.push_back(group);
    if (state_->verdict.empty() && state_->fenced.empty()) return;
    late = group.lock();  // made after the verdict: told at once
    text = state_->verdict.empty() ? state_->fenced : state_->verdict;
    dead = state_->verdict.empty() ? state_->rank : state_->verdict_rank;
    self = !state_->fenced.empty();
  }
  if (late != nullptr) late->OnVerdict(dead, text, self);
}

namespace {

// A subscription's callback as a watched group: OnVerdict calls it once,
// unless the subscription ended.
class CallbackGroup final : public WatchedGroup {
 public:
  explicit CallbackGroup(std::function<void(const Verdict&)> callback)
      : callback_(std::move(callback)) {}
  void OnVerdict(int dead, const std::string& verdict, bool fenced) override {
    (void)fenced;
    sync_internal::MutexLock lock(&mu_);
    if (called_ || ended_) return;
    called_ = true;
    callback_(Verdict{dead, verdict});
  }
  void End() {
    sync_internal::MutexLock lock(&mu_);  // waits for a call in progress
    ended_ = true;
  }

 private:
  sync_internal::Mutex mu_;
  const std::function<void(const Verdict&)> callback_;
  bool called_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

class CallbackSubscription final : public VerdictSubscription {
 public:
  explicit CallbackSubscription(std::shared_ptr<CallbackGroup> group)
      : group_(std::move(group)) {}
  ~CallbackSubscription() override { group_->End(); }

 private:
  std::shared_ptr<CallbackGroup> group_;
};

}  // namespace

namespace {

absl::Status EpochOver(int64_t epoch, int64_t current) {
  return absl::FailedPreconditionError(absl::StrCat(
      "epoch ", epoch, " is not the job's current epoch (", current,
      "; DeviceMesh::Shrink and Grow move it on)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerdictSubscription>> FailureWatch::Subscribe(
    int64_t epoch, std::function<void(const Verdict&)> callback) {
  auto group = std::make_shared<CallbackGroup>(std::move(callback));
  std::string text;
  int dead = -1;
  bool known = false;
  {
    sync_internal::MutexLock lock(&state_->mu);
    if (state_->epoch != epoch) return EpochOver(epoch, state_->epoch);
    auto& subs = state_->subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [](const std::weak_ptr<WatchedGroup>& w) {
                                return w.expired();
                              }),
               subs.end());
    subs.push_back(group);
    // While groups are being told, the teller calls it afterwards.
    if ((!state_->verdict.empty() || !state_->fenced.empty()) &&
        state_->telling == 0) {
      known = true;
      text = state_->verdict.empty() ? state_->fenced : state_->verdict;
      dead = state_->verdict.empty() ? state_->rank : state_->verdict_rank;
    }
  }
  if (known) group->OnVerdict(dead, text, /*fenced=*/dead == state_->rank);
  return std::unique_ptr<VerdictSubscription>(
      std::make_unique<CallbackSubscription>(std::move(group)));
}

absl::StatusOr<Verdict> FailureWatch::WaitForVerdict(
    int64_t epoch, absl::Time deadline) const {
  const std::shared_ptr<State> keep = state_;
  State& state = *keep;
  sync_internal::MutexLock lock(&state.mu);
  for (;;) {
    if (state.epoch != epoch) return EpochOver(epoch, state.epoch);
    // Once the groups were told (they refuse calls first).
    if (!state.verdict.empty() && state.telling == 0) {
      return Verdict{state.verdict_rank, state.verdict};
    }
    if (!state.fenced.empty() && state.telling == 0) {
      return Verdict{state.rank, state.fenced};
    }
    if (state.stop.load()) {
      return absl::CancelledError(
          "the failure watch stopped (its runtime ended) before a verdict");
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no death in epoch ", state.epoch, " known to global rank ",
          state.rank, " by the deadline"));
    }
    if (deadline == absl::InfiniteFuture()) {
      state.verdict_cv.Wait(&state.mu);
    } else {
      state.verdict_cv.WaitWithDeadline(&state.mu, deadline);
    }
  }
}

std::string FailureWatch::verdict() const {
  sync_internal::MutexLock lock(&state_->mu);
  return state_->verdict;
}

int FailureWatch::verdict_rank() const {
  sync_internal::MutexLock lock(&state_->mu);
  return state_->verdict_rank;
}

absl::Time FailureWatch::verdict_time() const {
  sync_internal::MutexLock lock(&state_->mu);
  return state_->verdict_time;
}

std::string FailureWatch::fenced() const {
  sync_internal::MutexLock lock(&state_->mu);
  return state_->fenced;
}

void FailureWatch::Fence(const std::string& why) { state_->FenceWith(why); }

bool FailureWatch::ProcessGoneHere(int rank) { return state_->Gone(rank); }

bool FailureWatch::ProcessRunningHere(int rank) {
  return state_->Live(rank) == Liveness::kRunning;
}

bool FailureWatch::JudgeGoneMembers(const std::vector<int>& members) {
  if (!verdict().empty()) return true;
  int64_t at_epoch;
  std::vector<int> epoch_members;
  {
    sync_internal::MutexLock lock(&state_->mu);
    at_epoch = state_->epoch;
    epoch_members = state_->members;
  }
  for (int peer : members) {
    // Only the epoch's members: a rank a Grow is admitting may be a new
    // process whose predecessor's identity is still known here.
    if (peer == state_->rank ||
        !std::binary_search(epoch_members.begin(), epoch_members.end(),
                            peer) ||
        !state_->Gone(peer) || state_->Left(peer)) {
      continue;
    }
    (void)state_->Publish(at_epoch, peer, state_->GoneText(peer));
    break;
  }
  if (!verdict().empty()) return true;
  // Members on other hosts (or whose process this kernel cannot see): their
  // lease, read at most once a rebuild slice each. One that shows no renewal
  // for confirm_wait() (counter: CounterConfirmWait, 3 periods up to about
  // 430 ms; etcd: its key gone at expiry) while
  // this rank waits for it is dead, as a failed call's suspect is in
  // Explain: the wait is the evidence, the lease decides. Without this a
  // wait for a member on another host ended only at its successor's
  // verdict, after the silence (2 s) plus up to two periods.
  device_mesh_internal::RankLiveness& liveness = *state_->liveness;
  for (int peer : members) {
    if (peer == state_->rank ||
        !std::binary_search(epoch_members.begin(), epoch_members.end(),
                            peer) ||
        !state_->Known(peer) || state_->Live(peer) != Liveness::kNotHere) {
      continue;
    }
    const absl::Time now = absl::Now();
    {
      sync_internal::MutexLock lock(&state_->mu);
      if (state_->judged_epoch != at_epoch) {
        state_->judged.clear();
        state_->judged_epoch = at_epoch;
      }
      auto it = state_->judged.find(peer);
      if (it != state_->judged.end() &&
          now - it->second.read_at < liveness.rebuild_slice(state_->period)) {
        continue;
      }
    }
    absl::StatusOr<device_mesh_internal::LeaseReading> reading =
        liveness.Read(peer);
    if (!reading.ok()) continue;
    absl::Duration silent;
    bool lapsed = false;
    {
      sync_internal::MutexLock lock(&state_->mu);
      if (state_->judged_epoch != at_epoch) continue;  // moved on meanwhile
      auto it = state_->judged.find(peer);
      if (it == state_->judged.end() ||
          (!reading->expired &&
           !liveness.LapsedBetween(it->second.reading, *reading))) {
        state_->judged[peer] = State::LeaseSeen{*reading, now, now};
        lapsed = reading->expired;  // etcd's word: no second reading
        silent = liveness.confirm_wait();
      } else {
        it->second.read_at = now;
        silent = now - it->second.since;
        lapsed = reading->expired || silent >= liveness.confirm_wait();
      }
    }
    if (!lapsed || state_->Left(peer)) continue;
    (void)state_->Publish(
        at_epoch, peer,
        state_->LeaseText(peer, absl::Trunc(silent, absl::Milliseconds(1)),
                          " while a rebuild waited for it"));
    break;
  }
  return !verdict().empty();
}

int64_t FailureWatch::epoch() const {
  sync_internal::MutexLock lock(&state_->mu);
  return state_->epoch;
}

std::vector<int> FailureWatch::members() const {
  sync_internal::MutexLock lock(&state_->mu);
  return state_->members;
}

int FailureWatch::rank() const { return state_->rank; }
absl::Duration FailureWatch::period() const { return state_->period; }
absl::Duration FailureWatch::silence() const { return state_->silence; }
Store& FailureWatch::store() const { return *state_->store; }
device_mesh_internal::RankLiveness& FailureWatch::liveness() const {
  return *state_->liveness;
}

void FailureWatch::AdvanceEpoch(int64_t epoch, std::vector<int> members) {
  std::vector<std::shared_ptr<WatchedGroup>> old;
  std::vector<int> renewed;  // members new to the epoch
  {
    sync_internal::MutexLock lock(&state_->mu);
    if (epoch <= state_->epoch) return;
    for (int r : members) {
      if (!std::binary_search(state_->members.begin(), state_->members.end(),
                              r)) {
        state_->procs.erase(r);
        renewed.push_back(r);
      }
    }
    state_->epoch = epoch;
    state_->members = std::move(members);
    state_->verdict.clear();
    state_->verdict_rank = -1;
    state_->verdict_time = absl::InfinitePast();
    state_->DropProbes(state_->members, renewed);
    old = state_->LiveGroupsLocked();
    state_->groups.clear();
    state_->subscribers.clear();
  }
  state_->verdict_cv.SignalAll();  // WaitForVerdict's of the old epoch end
  // The old epoch's groups refuse from now on (most already do, after the
  // verdict), and are not told of the new epoch's verdicts.
  const std::string text = absl::StrCat(
      "this group belongs to epoch ", epoch - 1, " and the job moved on to "
      "epoch ", epoch, " (DeviceMesh::Shrink)");
  for (auto& g : old) g->OnVerdict(-1, text, /*fenced=*/false);
}

absl::StatusOr<Verdict> FailureWatch::ReadVerdict(int64_t epoch) {
  {
    // A verdict is set once (CompareSet): the one learnt is the store's.
    sync_internal::MutexLock lock(&state_->mu);
    if (epoch == state_->epoch && !state_->verdict.empty()) {
      return Verdict{state_->verdict_rank, state_->verdict};
    }
  }
  DEVMESH_ASSIGN_OR_RETURN(auto v,
                           state_->store->GetIfSet(EpochKey(epoch, "death")));
  if (!v.has_value()) {
    return absl::NotFoundError(absl::StrCat("no verdict in epoch ", epoch));
  }
  state_->Decide(epoch, *v);
  return DecodeVerdict(*v);
}

absl::Status FailureWatch::Explain(const absl::Status& error,
                                   const std::vector<int>& members) {
  if (error.ok() || !(absl::IsUnavailable(error) ||
                      absl::IsDeadlineExceeded(error))) {
    return error;
  }
  auto explained = [&]() {
    if (std::string f = fenced(); !f.empty()) {
      return WithPayloadsOf(
          WithFenced(absl::FailedPreconditionError(
                         absl::StrCat(f, " -- this call: ", error.message())),
                     rank()),
          error);
    }
    const std::string v = verdict();
    if (v.empty()) return error;  // the epoch moved on meanwhile
    // The verdict's rank is the error's peer now, whatever the backend named.
    absl::Status out = absl::UnavailableError(
        absl::StrCat(v, " -- this call: ", error.message()));
    const int dead = verdict_rank();
    if (dead >= 0) out = WithPeer(std::move(out), dead);
    out = WithPayloadsOf(std::move(out), error);
    // Facts about another rank than the error's peer (now the verdict's)
    // would read as facts about it: drop them.
    const int peer = PeerRank(out);
    if (ProcessGoneRank(out) >= 0 && ProcessGoneRank(out) != peer) {
      out.ErasePayload(kProcessGonePayload);
    }
    if (PeerLeftRank(out) >= 0 && PeerLeftRank(out) != peer) {
      out.ErasePayload(kPeerLeftPayload);
    }
    return out;
  };
  if (!verdict().empty() || !fenced().empty()) return explained();
  std::string note;
  int64_t at_epoch;
  {
    sync_internal::MutexLock lock(&state_->mu);
    note = state_->store_note;
    at_epoch = state_->epoch;
  }
  if (!note.empty()) {
    // The store is not answering: no lease can be read. Say so, keep the
    // code.
    return Reworded(
        error, absl::StrCat(error.message(),
                            " (the job's store is not answering: ", note, ")"));
  }
  Store& store = *state_->store;
  const std::string death_key = EpochKey(at_epoch, "death");
  // The survivors may already have agreed without this rank (it was stopped
  // past its lease, say): it is fenced. (A decision needs a verdict first,
  // epoch_agreement.h: with no verdict there is none.)
  auto fence_if_left_out = [&]() {
    if (auto d = store.GetIfSet(EpochKey(at_epoch, "decision"));
        d.ok() && d->has_value() &&
        !device_mesh_internal::IsSurvivor(**d, state_->rank)) {
      state_->FenceWith(absl::StrCat(
          "global rank ", state_->rank, " (this rank) is fenced out of the "
          "job: the survivors of epoch ", at_epoch, " (", **d,
          ") went on without it (exit, or start over as a new job)"));
    }
  };
  // The suspects: the peer the error names, else every other member.
  std::vector<int> suspects;
  if (const int peer = PeerRank(error);
      peer >= 0 && peer != state_->rank &&
      std::find(members.begin(), members.end(), peer) != members.end()) {
    suspects.push_back(peer);
  } else {
    for (int r : members) {
      if (r != state_->rank) suspects.push_back(r);
    }
  }
  // The peer the error names (or the backend found gone), when this kernel
  // shows its process gone: published at once, before any read of the
  // verdict (CompareSet keeps a verdict already there, and the watch then
  // acts on that one). The backend may have seen it already
  // (kProcessGonePayload: its pidfd or /proc, this host's kernel too), which
  // spares the store read of the peer's identity. (An error that names no
  // one is looked into below, after the verdict is read: each member's
  // process would cost store reads.)
  const int gone = ProcessGoneRank(error);
  for (int peer : suspects) {
    if (peer != gone && suspects.size() > 1) continue;
    if (!(peer == gone || state_->Gone(peer)) || state_->Left(peer)) continue;
    const std::string text = state_->GoneText(peer);
    if (!state_->Publish(at_epoch, peer, text)) return error;
    if (verdict() != text) fence_if_left_out();
    return explained();
  }
  if (ReadVerdict(at_epoch).ok()) {
    fence_if_left_out();
    return explained();
  }
  // A suspect whose process this kernel shows gone is dead now (the
  // kernel's word, not a peer's; looked at every 10 ms while the leases
  // run, as the socket can close a moment before the kernel marks the
  // process); another rank may publish the verdict first.
  device_mesh_internal::RankLiveness& liveness = *state_->liveness;
  std::vector<absl::StatusOr<device_mesh_internal::LeaseReading>> before;
  absl::Time lease_end;
  for (int poll = 0;; ++poll) {
    // (At poll 0 a lone suspect was looked at just above.)
    if (poll > 0 || suspects.size() > 1) {
      for (int peer : suspects) {
        if (!state_->Gone(peer) || state_->Left(peer)) continue;
        if (!state_->Publish(at_epoch, peer, state_->GoneText(peer))) {
          return error;
        }
        return explained();
      }
    }
    if (poll == 0) {
      // Two readings of each suspect's lease, confirm_wait() apart (none
      // needed when every lease is known expired already: etcd's word).
      bool all_expired = true;
      for (int r : suspects) {
        before.push_back(liveness.Read(r));
        all_expired = all_expired && before.back().ok() && before.back()->expired;
      }
      lease_end = absl::Now() + (all_expired ? absl::ZeroDuration()
                                             : liveness.confirm_wait());
    }
    if (poll % 5 == 4) {
      if (auto v = store.GetIfSet(death_key); v.ok() && v->has_value()) {
        state_->Decide(at_epoch, **v);
        return explained();
      }
    }
    const absl::Time now = absl::Now();
    if (now >= lease_end) break;
    absl::SleepFor(std::min(absl::Milliseconds(10), lease_end - now));
  }
  for (size_t i = 0; i < suspects.size(); ++i) {
    const int peer = suspects[i];
    auto after = liveness.Read(peer);
    if (!before[i].ok() || !after.ok() ||
        !(after->expired || liveness.LapsedBetween(*before[i], *after)) ||
        state_->Left(peer)) {
      continue;
    }
    // A lease that did not move for a process this kernel shows running is a
    // slow rank (an overloaded machine), not a dead one: the error stands.
    if (state_->Live(peer) == Liveness::kRunning) continue;
    if (!state_->Publish(at_epoch, peer,
                         state_->LeaseText(peer, liveness.confirm_wait()))) {
      return error;
    }
    return explained();
  }
  // A live peer (it was woken by a verdict, or it aborted its group): wait a
  // little for a verdict from elsewhere.
  if (auto v = store.Get(death_key, state_->period * kLeaseMisses); v.ok()) {
    state_->Decide(at_epoch, *v);
    return explained();
  }
  return error;
}

}  // namespace devmesh
