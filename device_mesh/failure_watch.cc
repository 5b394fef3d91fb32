// devmesh/device_mesh/failure_watch.cc
#include "device_mesh/failure_watch.h"

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
  std::string verdict;  // guarded by mu
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
    int failures = 0;
    while (!stop.load()) {
      absl::Status renewed = store->Add(LeaseKey(rank), 1).status();
      auto death = store->Get(kDeathKey, period);
      if (stop.load()) return;
      if (death.ok()) {
        Decide(*death);
        // Keep renewing: this rank is alive (a Shrink reads the leases).
        absl::SleepFor(period);
        continue;
      }
      const bool store_down =
          !renewed.ok() || (!absl::IsDeadlineExceeded(death.status()) &&
                            !absl::IsNotFound(death.status()));
      failures = store_down ? failures + 1 : 0;
      if (failures >= 2) {
        // Recorded for Explain, without aborting: a job whose rank 0 (the
        // store's host) ends first must not stop groups that no longer
        // need the store.
        std::lock_guard<std::mutex> lock(mu);
        if (verdict.empty()) {
          verdict = absl::StrCat(
              "the store went away (",
              (!renewed.ok() ? renewed : death.status()).ToString(), ")");
        }
        return;
      }
      if (store_down) absl::SleepFor(period);
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
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->comms.push_back(std::move(comm));
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
  Store& store = *state_->store;
  if (auto v = store.Get(kDeathKey, absl::Milliseconds(1)); v.ok()) {
    state_->Decide(*v);
    return explained(state_->Verdict());
  }
  // The suspects: the peer the error names, else every other member.
  std::vector<int> suspects;
  if (const int peer = PeerNamed(error.message());
      peer >= 0 && peer != state_->rank) {
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
