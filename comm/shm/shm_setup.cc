// devmesh/comm/shm/shm_setup.cc
#include "comm/shm/shm_setup.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "comm/communicator.h"
#include "comm/error_info.h"
#include "comm/shm/shm_exit_watch.h"
#include "comm/shm/shm_futex.h"
#include "comm/shm/shm_names.h"
#include "comm/shm/shm_process.h"
#include "comm/shm/shm_segment.h"
#include "comm/store_exchange.h"
#include "config/settings.h"
#include "status/status_macros.h"

namespace devmesh {
namespace shm_internal {
namespace {

constexpr size_t kTextBytes = 240;

// Fixed-size records, sent over the group as uint8 buffers (every member
// runs the same binary layout: one host).
struct Offer {
  uint32_t ok;
  uint32_t pad;
  uint64_t nonce;
  char name[64];
  char error[kTextBytes];
};

struct Report {
  uint32_t ok;
  uint32_t pad;
  int64_t pid;
  uint64_t start_time;
  char error[kTextBytes];
};

// One member's judgement of the others (step 5), in the read_result word of
// its member line (unused until the group's first single-copy call, which
// writes it only after every member has passed step 6): set, ok, single copy
// (it read every other member's probe word with process_vm_readv, so the
// single-copy path may be used with them), or the reason and the first
// member, in group order, it found wrong. Bit 31 stays clear, so that the
// single-copy path never reads a verdict as a failed read.
constexpr uint64_t kVerdictSet = uint64_t{1} << 63;
constexpr uint64_t kVerdictOk = uint64_t{1} << 62;
constexpr uint64_t kVerdictSingleCopy = uint64_t{1} << 61;
constexpr uint64_t kVerdictMember = (uint64_t{1} << 30) - 1;  // bits 0-29
constexpr uint64_t kReasonIdentity = 1;    // bits 32-39
constexpr uint64_t kReasonNotVisible = 2;
constexpr uint64_t kReasonGaveUp = 3;      // its own exchange failed

// Whether this process can read `pid`'s memory at `addr`, where that member
// keeps the segment's nonce: process_vm_readv (cross-memory attach) is
// allowed to a process of the same user unless a security module (Yama's
// ptrace_scope, a container's seccomp filter) forbids it.
bool CanReadPeer(int64_t pid, uint64_t addr, uint64_t nonce) {
  uint64_t value = 0;
  iovec local{&value, sizeof(value)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(value)};
  return process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1,
                          0) == static_cast<ssize_t>(sizeof(value)) &&
         value == nonce;
}

bool SingleCopyAllowed() {
  return ProcessSettings().shm_single_copy.value_or(true);
}

void CopyText(char* dst, absl::string_view text) {
  const size_t n = std::min(text.size(), kTextBytes - 1);
  std::memcpy(dst, text.data(), n);
  dst[n] = '\0';
}

uint64_t RandomWord() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

template <typename T>
absl::Status AllGatherRecords(SetupChannel& channel, const T& mine,
                              std::vector<T>* all) {
  all->assign(channel.size(), T());
  return channel.AllGather(&mine, all->data(), sizeof(T));
}

// The set-up's FailedPrecondition: member `bad` found wrong by member
// `checker` (-1: by itself, in its report).
absl::Status CannotShare(const std::vector<int>& ranks, int bad, int checker,
                         absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "shm: global rank ", ranks[bad],
      " cannot share memory with the group's other members (",
      checker < 0 ? std::string("as it reported")
                  : absl::StrCat("checked by global rank ", ranks[checker]),
      "): ", why,
      ". Use backend \"ucx\" for groups across hosts, or leave the backend "
      "unset to use shared memory only where members share it"));
}

// Writes `mine` as this member's verdict (step 6) and rings the bell.
void PublishVerdict(ShmSegment& segment, int me, uint64_t mine) {
  SyncLine* sync = segment.sync();
  segment.member(me)->read_result.store(mine, std::memory_order_release);
  sync->bell.fetch_add(1, std::memory_order_acq_rel);
  FutexWake(&sync->bell, INT32_MAX);
}

// Step 6: publishes `mine` and waits, on the sync line's bell, for every
// other member's verdict. Members in `watched` (those this member saw
// running in step 5) are followed: an exit rings the bell (ExitWatch, a
// pidfd), and where that cannot be had /proc is read after 10 ms, then at
// doubling intervals up to 1 s; one found gone is named (Unavailable). The
// channel's Cancelled() is asked every 100 ms (a member that was not seen
// running, or died before step 5, is found by it: the job's verdict); its
// error ends the wait. A member still missing at `deadline` is named
// (DeadlineExceeded).
absl::StatusOr<std::vector<uint64_t>> ExchangeVerdicts(
    ShmSegment& segment, int me, uint64_t mine,
    const std::vector<ProcessIdentity>& identities,
    const std::vector<bool>& watched, const std::vector<int>& ranks,
    absl::Time deadline, const SetupChannel& channel) {
  constexpr absl::Duration kCancelEvery = absl::Milliseconds(100);
  const int n = static_cast<int>(identities.size());
  SyncLine* sync = segment.sync();
  std::vector<uint64_t> handles;
  bool every_exit_watched = true;
  std::atomic<bool> exited{false};  // set by the watch's thread
  for (int j = 0; j < n; ++j) {
    if (j == me || !watched[j]) continue;
    const uint64_t h = ExitWatch::Get().Watch(identities[j], [sync, &exited] {
      exited.store(true, std::memory_order_release);
      sync->bell.fetch_add(1, std::memory_order_acq_rel);
      FutexWake(&sync->bell, INT32_MAX);
    });
    if (h == 0) every_exit_watched = false;
    handles.push_back(h);
  }
  struct Unwatch {
    std::vector<uint64_t>& handles;
    ~Unwatch() {
      for (uint64_t h : handles) ExitWatch::Get().Unwatch(h);
    }
  } unwatch{handles};
  PublishVerdict(segment, me, mine);
  std::vector<uint64_t> all(n, 0);
  // Without exit watches, the missing members' processes are read in /proc
  // after 10 ms, then at doubling intervals up to 1 s: a member late because
  // the machine is overloaded (1024 ranks on 2 cores) must not be made later
  // by its peers reading /proc every 10 ms. With them, /proc is read when
  // a watched member exited, and every second.
  absl::Duration look_every =
      every_exit_watched ? absl::Seconds(1) : absl::Milliseconds(10);
  absl::Time next_look = absl::Now() + look_every;
  absl::Time next_cancel = absl::Now() + kCancelEvery;
  while (true) {
    const uint32_t bell = sync->bell.load(std::memory_order_acquire);
    std::vector<int> missing;
    for (int j = 0; j < n; ++j) {
      all[j] = segment.member(j)->read_result.load(std::memory_order_acquire);
      if ((all[j] & kVerdictSet) == 0) missing.push_back(j);
    }
    if (missing.empty()) return all;
    const absl::Time now = absl::Now();
    if (now >= next_look || exited.exchange(false)) {
      if (now >= next_look) {
        look_every = std::min(2 * look_every, absl::Seconds(1));
        next_look = now + look_every;
      }
      for (int j : missing) {
        if (!watched[j] || CheckLiveness(identities[j]) != Liveness::kDead) {
          continue;
        }
        return WithProcessGone(
            absl::UnavailableError(absl::StrCat(
                "shm set-up (global rank ", ranks[me], "): global rank ",
                ranks[j], " (pid ", identities[j].pid,
                ") exited before it checked the group's segment")),
            ranks[j]);
      }
    }
    if (now >= next_cancel) {
      next_cancel = now + kCancelEvery;
      if (absl::Status c = channel.Cancelled(); !c.ok()) {
        std::vector<int> who;
        for (int j : missing) who.push_back(ranks[j]);
        return Reworded(
            c, absl::StrCat("shm set-up (global rank ", ranks[me],
                            "): stopped waiting for the verdicts of global "
                            "rank(s) [",
                            absl::StrJoin(who, ", "), "]: ", c.message()));
      }
    }
    if (now >= deadline) {
      std::vector<int> who;
      for (int j : missing) who.push_back(ranks[j]);
      return absl::DeadlineExceededError(absl::StrCat(
          "shm set-up (global rank ", ranks[me], "): global rank(s) [",
          absl::StrJoin(who, ", "),
          "] mapped the group's segment but did not check it before the "
          "group's deadline"));
    }
    FutexWait(&sync->bell, bell,
              std::min({next_look, next_cancel, deadline}) - now);
  }
}

class GroupSetupChannel final : public SetupChannel {
 public:
  explicit GroupSetupChannel(Communicator& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  const std::vector<int>& global_ranks() const override {
    return group_.global_ranks();
  }
  absl::Status Broadcast(void* data, size_t bytes) override {
    return group_.Broadcast(data, data, bytes, DataType::kUInt8, 0);
  }
  absl::Status AllGather(const void* mine, void* all, size_t bytes) override {
    return group_.AllGather(mine, all, bytes, DataType::kUInt8);
  }

 private:
  Communicator& group_;
};

class StoreSetupChannel final : public SetupChannel {
 public:
  StoreSetupChannel(Store& store, std::string prefix, int rank,
                    std::vector<int> global_ranks, absl::Time deadline,
                    int64_t* round_trips, std::function<absl::Status()> cancel)
      : cancel_(std::move(cancel)),
        store_(store),
        prefix_(std::move(prefix)),
        rank_(rank),
        global_ranks_(std::move(global_ranks)),
        deadline_(deadline),
        round_trips_(round_trips != nullptr ? round_trips : &own_trips_),
        what_(absl::StrCat("shm set-up (rank ", rank_, " of ",
                           global_ranks_.size(), ", global rank ",
                           global_ranks_[rank_], ", prefix \"", prefix_,
                           "\")")) {}

  int rank() const override { return rank_; }
  const std::vector<int>& global_ranks() const override {
    return global_ranks_;
  }
  absl::Time deadline() const override { return deadline_; }
  absl::Status Cancelled() const override {
    return cancel_ ? cancel_() : absl::OkStatus();
  }

  absl::Status Broadcast(void* data, size_t bytes) override {
    const int64_t step = step_++;
    const std::string key = Key(step, 0);
    if (rank_ == 0) return Put(key, data, bytes);
    ++*round_trips_;
    auto value = store_.Get(key, comm_internal::Remaining(deadline_));
    if (!value.ok()) {
      if (absl::IsDeadlineExceeded(value.status())) {
        return absl::DeadlineExceededError(absl::StrCat(
            what_, ": global rank(s) [", global_ranks_[0],
            "] did not join the group before the group's deadline"));
      }
      return absl::Status(value.status().code(),
                          absl::StrCat(what_, ": store: ",
                                       value.status().message()));
    }
    return Unpack(*value, 0, data, bytes);
  }

  absl::Status AllGather(const void* mine, void* all, size_t bytes) override {
    const int64_t step = step_++;
    DEVMESH_RETURN_IF_ERROR(Put(Key(step, rank_), mine, bytes));
    char* out = static_cast<char*>(all);
    std::memcpy(out + static_cast<size_t>(rank_) * bytes, mine, bytes);
    std::vector<std::string> keys;
    std::vector<int> globals;
    std::vector<int> members;
    for (int r = 0; r < size(); ++r) {
      if (r == rank_) continue;
      keys.push_back(Key(step, r));
      globals.push_back(global_ranks_[r]);
      members.push_back(r);
    }
    if (keys.empty()) return absl::OkStatus();
    DEVMESH_ASSIGN_OR_RETURN(
        std::vector<std::string> values,
        comm_internal::StoreAllGather(store_, keys, globals, deadline_, what_,
                                      "did not join the group", round_trips_));
    for (size_t i = 0; i < members.size(); ++i) {
      if (absl::Status s =
              Unpack(values[i], members[i],
                     out + static_cast<size_t>(members[i]) * bytes, bytes);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string Key(int64_t step, int r) const {
    return absl::StrCat(prefix_, "setup/", step, "/", r);
  }

  // Without its trailing zero bytes (at least one byte: an empty value is
  // not every store's to keep).
  absl::Status Put(const std::string& key, const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    size_t n = bytes;
    while (n > 1 && p[n - 1] == '\0') --n;
    ++*round_trips_;
    absl::Status s = store_.Set(key, absl::string_view(p, n));
    if (s.ok()) return s;
    return absl::Status(s.code(),
                        absl::StrCat(what_, ": store: ", s.message()));
  }

  absl::Status Unpack(const std::string& value, int from, void* out,
                      size_t bytes) const {
    if (value.size() > bytes) {
      return absl::InternalError(absl::StrCat(
          what_, ": global rank ", global_ranks_[from], " published ",
          value.size(), " bytes for a record of ", bytes,
          " (another devmesh build?)"));
    }
    std::memset(out, 0, bytes);
    std::memcpy(out, value.data(), value.size());
    return absl::OkStatus();
  }

  const std::function<absl::Status()> cancel_;
  Store& store_;
  const std::string prefix_;
  const int rank_;
  const std::vector<int> global_ranks_;
  const absl::Time deadline_;
  int64_t own_trips_ = 0;
  int64_t* const round_trips_;
  const std::string what_;
  int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<SetupChannel> GroupChannel(Communicator& group) {
  return std::make_unique<GroupSetupChannel>(group);
}

std::unique_ptr<SetupChannel> StoreChannel(
    Store& store, std::string prefix, int rank, std::vector<int> global_ranks,
    absl::Time deadline, int64_t* round_trips,
    std::function<absl::Status()> cancel) {
  return std::make_unique<StoreSetupChannel>(
      store, std::move(prefix), rank, std::move(global_ranks), deadline,
      round_trips, std::move(cancel));
}

namespace {

// Segments left by set-ups that were stopped (shm_names.h): removed once per
// process before its first segment, and after any set-up that failed (the
// maker that stopped it may have left one). Errors are ignored: the sweep
// only tidies /dev/shm.
void RemoveStaleSegmentsOnce() {
  static std::once_flag once;
  std::call_once(once, [] { (void)RemoveStaleSegments(); });
}

absl::StatusOr<std::optional<ShmSetup>> SetUp(SetupChannel& channel_ref,
                                              const ShmOptions& given) {
  SetupChannel* group = &channel_ref;
  if (given.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm: timeout (", absl::FormatDuration(given.timeout),
        ") must be positive"));
  }
  ShmOptions options = given;
  // DEVMESH_SHM_SLOT_BYTES overrides the slot size (a tuning knob).
  if (std::optional<size_t> v = ProcessSettings().shm_slot_bytes) {
    options.slot_bytes = *v;
  }
  const int n = group->size();
  const int me = group->rank();
  const std::vector<int>& ranks = group->global_ranks();
  options.slot_bytes = std::max<size_t>(
      (options.slot_bytes + kCacheLine - 1) /
          kCacheLine * kCacheLine,
      kCacheLine * static_cast<size_t>(n));
  auto self = SelfIdentity();
  if (n == 1) {
    if (!self.ok()) return self.status();
    return ShmSetup{nullptr, {*self}, options, false};
  }

  // 1-2. Rank 0 makes the segment and offers it.
  Offer offer{};
  std::unique_ptr<ShmSegment> segment;
  if (me == 0) {
    RemoveStaleSegmentsOnce();
    offer.nonce = RandomWord();
    std::string name;
    absl::StatusOr<std::unique_ptr<ShmSegment>> made = absl::UnknownError("");
    absl::StatusOr<uint64_t> pid_namespace = OwnPidNamespace();
    if (!self.ok()) {
      made = self.status();
    } else {
      name =
          pid_namespace.ok()
              ? SegmentName(SegmentMaker{*pid_namespace, *self}, RandomWord())
              : UnsweptSegmentName(RandomWord());
      static_assert(sizeof(Offer::name) > kMaxSegmentNameLength);
      made = ShmSegment::Create(name, n, options.slot_bytes, offer.nonce);
    }
    if (made.ok()) {
      segment = std::move(*made);
      segment->header()->check_calls = options.check_calls ? 1 : 0;
      offer.ok = 1;
      std::memcpy(offer.name, name.c_str(), name.size() + 1);
    } else {
      CopyText(offer.error, made.status().ToString());
    }
  }
  if (absl::Status s = group->Broadcast(&offer, sizeof(offer)); !s.ok()) {
    if (segment != nullptr) (void)ShmSegment::Unlink(offer.name);
    return s;
  }
  offer.name[sizeof(offer.name) - 1] = '\0';

  // 3. Every other member maps it; each writes its identity.
  Report report{};
  if (!self.ok()) {
    CopyText(report.error, self.status().ToString());
  } else if (!offer.ok) {
    CopyText(report.error, absl::StrCat("global rank ", ranks[0],
                                        " could not make the segment: ",
                                        offer.error));
  } else {
    if (me != 0) {
      auto opened =
          ShmSegment::Open(offer.name, n, options.slot_bytes, offer.nonce);
      if (opened.ok()) {
        segment = std::move(*opened);
      } else {
        CopyText(report.error, opened.status().message());
      }
    }
    if (segment != nullptr) {
      MemberLine* line = segment->member(me);
      line->pid = self->pid;
      line->start_time = self->start_time;
      line->nonce_echo = offer.nonce;
      line->probe_addr = reinterpret_cast<uint64_t>(&segment->header()->nonce);
      line->state.store(kMemberMapped);
      // The last member to map removes the name at once: a SIGKILL of
      // every member from here on leaves nothing in /dev/shm (rank 0 still
      // removes it at step 4 when a member could not map it).
      if (me != 0 &&
          segment->header()->mapped.fetch_add(1) + 1 ==
              static_cast<uint32_t>(n)) {
        (void)ShmSegment::Unlink(offer.name);
      }
      report.ok = 1;
      report.pid = self->pid;
      report.start_time = self->start_time;
    }
  }
  std::vector<Report> reports;
  absl::Status gathered = AllGatherRecords(*group, report, &reports);
  // 4. Everyone has tried to map it: nothing stays in /dev/shm (the last
  // member to map removed the name already when every member could).
  if (me == 0 && offer.ok) (void)ShmSegment::Unlink(offer.name);
  if (!gathered.ok()) {
    // Peers whose exchange succeeded wait in step 6: tell them this member
    // gave up, so that they fail now rather than at the deadline.
    if (segment != nullptr) {
      PublishVerdict(*segment, me,
                     kVerdictSet | (kReasonGaveUp << 32) |
                         static_cast<uint64_t>(me));
    }
    return gathered;
  }

  // A member that could not map the segment: every member sees the same
  // reports, so every member returns the same answer without step 6.
  std::vector<ProcessIdentity> identities(n);
  for (int j = 0; j < n; ++j) {
    const Report& r = reports[j];
    identities[j] = ProcessIdentity{r.pid, r.start_time};
    if (r.ok) continue;
    if (!options.require) return std::optional<ShmSetup>();
    return CannotShare(ranks, j, /*checker=*/-1,
                       r.error[kTextBytes - 1] == '\0' ? r.error
                                                        : "(unreadable reason)");
  }

  // 5. Check every other member through the segment and /proc.
  uint64_t verdict = kVerdictSet | kVerdictOk |
                     (SingleCopyAllowed() ? kVerdictSingleCopy : 0);
  std::vector<bool> running(n, false);  // seen running here: followed in 6
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    running[j] = CheckLiveness(identities[j]) == Liveness::kAlive;
    if ((verdict & kVerdictOk) == 0) continue;
    const MemberLine* line = segment->member(j);
    uint64_t reason = 0;
    if (line->pid != reports[j].pid ||
        line->start_time != reports[j].start_time ||
        line->nonce_echo != offer.nonce) {
      reason = kReasonIdentity;
    } else if ((verdict & kVerdictSingleCopy) != 0 &&
               !CanReadPeer(reports[j].pid, line->probe_addr, offer.nonce)) {
      verdict &= ~kVerdictSingleCopy;  // The slots still work: not an error.
    }
    if (reason == 0 && !running[j]) reason = kReasonNotVisible;
    if (reason != 0) {
      verdict = kVerdictSet | (reason << 32) | static_cast<uint64_t>(j);
    }
  }
  // A mapping that is not the one the others see cannot carry verdicts; it
  // can only be another segment, and then every member finds some member's
  // identity wrong in its own: each decides alone, alike.
  if ((verdict >> 32 & 0xff) == kReasonIdentity) {
    if (!options.require) return std::optional<ShmSetup>();
    const int bad = static_cast<int>(verdict & kVerdictMember);
    return CannotShare(
        ranks, bad, me,
        absl::StrCat("its identity in the segment (pid ",
                     segment->member(bad)->pid,
                     ") is not the one it announced (pid ", reports[bad].pid,
                     "): the segment is not shared with global rank ",
                     ranks[me]));
  }
  // 6. The verdicts meet in the segment (each in its member's line), so
  // every member reaches the same decision.
  const absl::Time deadline =
      std::min(group->deadline(), absl::Now() + options.timeout);
  DEVMESH_ASSIGN_OR_RETURN(std::vector<uint64_t> verdicts,
                           ExchangeVerdicts(*segment, me, verdict, identities,
                                            running, ranks, deadline, *group));
  bool single_copy = true;
  for (int i = 0; i < n; ++i) {
    const uint64_t v = verdicts[i];
    single_copy = single_copy && (v & kVerdictSingleCopy) != 0;
    if ((v & kVerdictOk) != 0) continue;
    const int bad = static_cast<int>(v & kVerdictMember) % n;
    const uint64_t reason = (v >> 32) & 0xff;
    if (reason == kReasonGaveUp) {
      return absl::UnavailableError(absl::StrCat(
          "shm set-up (global rank ", ranks[me], "): global rank ", ranks[bad],
          " gave up the set-up (its exchange over the group or the store "
          "failed)"));
    }
    if (!options.require) return std::optional<ShmSetup>();
    return CannotShare(
        ranks, bad, i,
        absl::StrCat("its pid ", reports[bad].pid,
                     " is not visible from global rank ", ranks[i],
                     " (another pid namespace): a dead member could not be "
                     "noticed"));
  }
  return ShmSetup{std::move(segment), std::move(identities), options,
                  single_copy};
}

}  // namespace

absl::StatusOr<std::optional<ShmSetup>> SetUpSharedMemory(
    SetupChannel& channel, const ShmOptions& given) {
  absl::StatusOr<std::optional<ShmSetup>> setup = SetUp(channel, given);
  if (!setup.ok()) (void)RemoveStaleSegments();
  return setup;
}

}  // namespace shm_internal
}  // namespace devmesh
