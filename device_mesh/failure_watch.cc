// devmesh/device_mesh/failure_watch.cc
#include "device_mesh/failure_watch.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace devmesh {
namespace {

constexpr char kDeathKey[] = "devmesh/job/death";

std::string LeaseKey(int rank) {
  return absl::StrCat("devmesh/job/lease/", rank);
}

std::string LeftKey(int rank) {
  return absl::StrCat("devmesh/job/left/", rank);
}

// The global rank an error names as its peer: the last "global rank N" in
// the message (Gloo's "(peer: global rank N)", the connect errors'
// "connecting to global rank N"); -1 when none.
int PeerNamed(absl::string_view message) {
  int found = -1;
  const absl::string_view tag = "global rank ";
  for (size_t at = message.find(tag); at != absl::string_view::npos;
       at = message.find(tag, at + 1)) {
    size_t end = at + tag.size();
    while (end < message.size() && message[end] >= '0' && message[end] <= '9') {
      ++end;
    }
    int r = -1;
    if (absl::SimpleAtoi(message.substr(at + tag.size(), end - at - tag.size()),
                         &r)) {
      found = r;
    }
  }
  return found;
}

}  // namespace

struct FailureWatch::State {
  std::shared_ptr<Store> store;
  int rank = 0;
  absl::Duration period;
  std::atomic<bool> stop{false};
  mutable std::mutex mu;
  std::string verdict;     // a death, guarded by mu
  std::string store_note;  // the store's last trouble, guarded by mu
  std::vector<std::weak_ptr<Communicator>> comms;  // guarded by mu

  // Records `text` as the verdict (first one wins) and aborts every
  // registered communicator.
  void Decide(const std::string& text) {
    std::vector<std::shared_ptr<Communicator>> live;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!verdict.empty()) return;
      verdict = text;
      for (auto& weak : comms) {
        if (auto comm = weak.lock()) live.push_back(std::move(comm));
      }
    }
    for (auto& comm : live) (void)comm->Abort();
  }

  std::string Verdict() const {
    std::lock_guard<std::mutex> lock(mu);
    return verdict;
  }

  void Run() {
    Loop();
    // A rank that ends its runtime left; it did not die (Explain reads
    // this). Here, on the detached thread, so that a store that is gone
    // never holds up the process's exit.
    (void)store->Set(LeftKey(rank), "1");
  }

  void Loop() {
    while (!stop.load()) {
      const absl::Time start = absl::Now();
      absl::Status renewed = store->Add(LeaseKey(rank), 1).status();
      auto death = store->Get(kDeathKey, period);
      if (stop.load()) return;
      if (death.ok()) Decide(*death);
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
        std::lock_guard<std::mutex> lock(mu);
        store_note = trouble.ok() ? "" : trouble.ToString();
      }
      // Never faster than one round per period, whatever the store answers.
      const absl::Duration left = period - (absl::Now() - start);
      if (left > absl::ZeroDuration()) absl::SleepFor(left);
    }
  }
};

std::shared_ptr<FailureWatch> FailureWatch::Start(std::shared_ptr<Store> store,
                                                  int rank,
                                                  absl::Duration period) {
  auto state = std::make_shared<State>();
  state->store = std::move(store);
  state->rank = rank;
  state->period = period;
  std::thread([state] { state->Run(); }).detach();
  return std::shared_ptr<FailureWatch>(new FailureWatch(state));
}

FailureWatch::~FailureWatch() { state_->stop.store(true); }

void FailureWatch::Register(std::weak_ptr<Communicator> comm) {
  std::shared_ptr<Communicator> late;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto& comms = state_->comms;
    comms.erase(std::remove_if(comms.begin(), comms.end(),
                               [](const std::weak_ptr<Communicator>& w) {
                                 return w.expired();
                               }),
                comms.end());
    if (state_->verdict.empty()) {
      comms.push_back(std::move(comm));
      return;
    }
    late = comm.lock();  // made after the verdict: aborted at once
  }
  if (late != nullptr) (void)late->Abort();
}

std::string FailureWatch::verdict() const { return state_->Verdict(); }

absl::Status FailureWatch::Explain(const absl::Status& error,
                                   const std::vector<int>& members) {
  if (error.ok() || !(absl::IsUnavailable(error) ||
                      absl::IsDeadlineExceeded(error))) {
    return error;
  }
  auto explained = [&](const std::string& verdict) {
    return absl::UnavailableError(
        absl::StrCat(verdict, " -- this call: ", error.message()));
  };
  if (std::string v = state_->Verdict(); !v.empty()) return explained(v);
  std::string note;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    note = state_->store_note;
  }
  if (!note.empty()) {
    // The store is not answering: no lease can be read. Say so, keep the
    // code.
    return absl::Status(error.code(),
                        absl::StrCat(error.message(),
                                     " (the job's store is not answering: ",
                                     note, ")"));
  }
  Store& store = *state_->store;
  if (auto v = store.Get(kDeathKey, absl::Milliseconds(1)); v.ok()) {
    state_->Decide(*v);
    return explained(state_->Verdict());
  }
  // The suspects: the peer the error names, else every other member.
  std::vector<int> suspects;
  if (const int peer = PeerNamed(error.message());
      peer >= 0 && peer != state_->rank &&
      std::find(members.begin(), members.end(), peer) != members.end()) {
    suspects.push_back(peer);
  } else {
    for (int r : members) {
      if (r != state_->rank) suspects.push_back(r);
    }
  }
  std::vector<absl::StatusOr<int64_t>> before;
  for (int r : suspects) before.push_back(store.Add(LeaseKey(r), 0));
  absl::SleepFor(state_->period * kLeaseMisses);
  for (size_t i = 0; i < suspects.size(); ++i) {
    const int peer = suspects[i];
    auto after = store.Add(LeaseKey(peer), 0);
    if (before[i].ok() && after.ok() && *before[i] == *after) {
      // A rank that ended its runtime left; it did not die.
      if (auto left = store.Check({LeftKey(peer)}); left.ok() && *left) {
        continue;
      }
      const std::string text = absl::StrCat(
          "global rank ", peer, " died (its lease was not renewed for ",
          absl::FormatDuration(state_->period * kLeaseMisses),
          "; first reported by global rank ", state_->rank, ")");
      auto won = store.CompareSet(kDeathKey, "", text);
      state_->Decide(won.ok() ? *won : text);
      return explained(state_->Verdict());
    }
  }
  // A live peer (it was woken by a verdict, or it aborted its group): wait a
  // little for a verdict from elsewhere.
  if (auto v = store.Get(kDeathKey, state_->period * kLeaseMisses); v.ok()) {
    state_->Decide(*v);
    return explained(state_->Verdict());
  }
  return error;
}

}  // namespace devmesh
