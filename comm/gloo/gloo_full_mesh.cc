// devmesh/comm/gloo/gloo_full_mesh.cc
#include "comm/gloo/gloo_full_mesh.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "comm/gloo/gloo_status.h"
#include "gloo/transport/context.h"
#include "gloo/transport/pair.h"

namespace devmesh {
namespace gloo_internal {
namespace {

// A gloo::Context whose transport context was connected by devmesh (Gloo's
// own subclasses, rendezvous::Context, install theirs the same way).
class InstalledContext : public ::gloo::Context {
 public:
  InstalledContext(int rank, int size,
                   std::shared_ptr<::gloo::transport::Device> device,
                   std::shared_ptr<::gloo::transport::Context> transport)
      : ::gloo::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = std::move(transport);
  }
};

// Closes every pair when `deadline` passes before Stop(). Gloo's pair
// connect waits up to 5 x its timeout and has no abort: closing the pair
// (Pair::close, under the pair's own lock) wakes the waiting thread.
class Watchdog {
 public:
  Watchdog(std::vector<::gloo::transport::Pair*> pairs, absl::Time deadline)
      : pairs_(std::move(pairs)), deadline_(deadline) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watchdog() { Stop(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool fired() {
    std::lock_guard<std::mutex> lock(mu_);
    return fired_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, absl::ToChronoTime(deadline_),
                       [this] { return done_; })) {
      return;
    }
    fired_ = true;
    lock.unlock();
    for (::gloo::transport::Pair* pair : pairs_) {
      // Close never throws for a listening or connecting pair; stay safe.
      (void)GlooCall("gloo connect watchdog: close", [&] { pair->close(); });
    }
  }

  const std::vector<::gloo::transport::Pair*> pairs_;
  const absl::Time deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;
};

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::Milliseconds(1));
}

std::vector<std::string> Keys(const std::string& prefix, absl::string_view kind,
                              int size) {
  std::vector<std::string> keys;
  keys.reserve(size);
  for (int r = 0; r < size; ++r) {
    keys.push_back(absl::StrCat(prefix, kind, "/", r));
  }
  return keys;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> StoreAllGather(
    Store& store, const std::vector<std::string>& keys,
    const std::vector<int>& global_ranks, absl::Time deadline,
    absl::string_view what, absl::string_view missing_means,
    int64_t* round_trips) {
  ++*round_trips;
  auto values = store.MultiGet(keys, Remaining(deadline));
  if (values.ok() || !absl::IsDeadlineExceeded(values.status())) {
    if (!values.ok()) {
      return absl::Status(values.status().code(),
                          absl::StrCat(what, ": store: ",
                                       values.status().message()));
    }
    return values;
  }
  std::vector<int> missing;
  for (size_t r = 0; r < keys.size(); ++r) {
    ++*round_trips;
    auto present = store.Check({keys[r]});
    if (present.ok() && !*present) missing.push_back(global_ranks[r]);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      what, ": global rank(s) [", absl::StrJoin(missing, ", "), "] ",
      missing_means, " before the group's deadline"));
}

absl::StatusOr<FullMesh> ConnectFullMesh(
    Store& store, const std::string& prefix, int rank, int size,
    const std::vector<int>& global_ranks,
    const std::shared_ptr<::gloo::transport::Device>& device,
    absl::Duration timeout, absl::Time deadline) {
  std::string what = absl::StrCat(
      "gloo connect (rank ", rank, " of ", size, ", global rank ",
      global_ranks[rank], ", prefix \"", prefix, "\")");
  FullMesh out;
  std::shared_ptr<::gloo::transport::Context> transport;
  std::string my_addresses;
  std::vector<::gloo::transport::Pair*> pairs(size, nullptr);
  absl::Status status = GlooCall(what, [&] {
    transport = device->createContext(rank, size);
    transport->setTimeout(absl::ToChronoMilliseconds(timeout));
    for (int i = 0; i < size; ++i) {
      if (i == rank) continue;
      auto& pair = transport->createPair(i);
      pairs[i] = pair.get();
      std::vector<char> bytes = pair->address().bytes();
      my_addresses.append(bytes.data(), bytes.size());
    }
  });
  if (!status.ok()) return status;
  if (size > 1) {
    // Name the address this rank advertises in every error below, so that a
    // rank its peers cannot reach says where they were told to connect.
    std::string advertised;
    for (auto* p : pairs) {
      if (p == nullptr) continue;
      (void)GlooCall(what, [&] { advertised = p->address().str(); });
      break;
    }
    if (size_t seq = advertised.find('$'); seq != std::string::npos) {
      advertised.resize(seq);  // the pair's sequence number
    }
    if (!advertised.empty()) {
      what.insert(what.size() - 1, absl::StrCat(", advertising ", advertised));
    }
    ++out.store_round_trips;
    status = store.Set(absl::StrCat(prefix, "addr/", rank), my_addresses);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(what, ": store: ", status.message()));
    }
    auto addresses = StoreAllGather(
        store, Keys(prefix, "addr", size), global_ranks, deadline, what,
        "did not join the group (no address published)",
        &out.store_round_trips);
    if (!addresses.ok()) return addresses.status();

    std::vector<::gloo::transport::Pair*> live;
    for (auto* p : pairs) {
      if (p != nullptr) live.push_back(p);
    }
    Watchdog watchdog(live, deadline);
    int failed_peer = -1;  // the pair being connected when it went wrong
    for (int i = 0; i < size && status.ok(); ++i) {
      if (i == rank) continue;
      failed_peer = i;
      if (watchdog.fired()) break;
      const std::string& all = (*addresses)[i];
      if (all.size() % (size - 1) != 0 || all.empty()) {
        status = absl::InternalError(absl::StrCat(
            what, ": global rank ", global_ranks[i], " published ",
            all.size(), " address bytes for ", size - 1, " peers"));
        break;
      }
      const size_t each = all.size() / (size - 1);
      const size_t slot = rank > i ? rank - 1 : rank;
      std::vector<char> addr(all.begin() + slot * each,
                             all.begin() + (slot + 1) * each);
      status = GlooCall(
          absl::StrCat(what, ": connecting to global rank ", global_ranks[i]),
          [&] { pairs[i]->connect(addr); });
    }
    watchdog.Stop();
    if (watchdog.fired()) {
      std::vector<int> unconfirmed;
      for (int i = std::max(failed_peer, 0); i < size; ++i) {
        // Pairs before failed_peer connected; the rest were not confirmed.
        if (i != rank) unconfirmed.push_back(global_ranks[i]);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": connections to global rank(s) [",
          absl::StrJoin(unconfirmed, ", "), "] not made within ",
          absl::FormatDuration(timeout), " (pairs closed by the watchdog)"));
    }
    if (!status.ok()) {
      // Tell the peers waiting in the barrier below, so that they fail now
      // (naming this rank) rather than at the deadline.
      ++out.store_round_trips;
      (void)store.Set(absl::StrCat(prefix, "up/", rank),
                      absl::StrCat("!", status.message()));
      return absl::Status(
          absl::IsInternal(status) ? status.code()
                                   : absl::StatusCode::kUnavailable,
          status.message());
    }

    // Barrier: publish the local end of each connection; every member's
    // endpoints mean every member has connected every pair.
    std::string endpoints;
    status = GlooCall(what, [&] {
      for (int i = 0; i < size; ++i) {
        if (i == rank) continue;
        absl::StrAppend(&endpoints, i, " ", pairs[i]->address().str(), "\n");
      }
    });
    if (!status.ok()) return status;
    const int64_t before_barrier = out.store_round_trips;
    ++out.store_round_trips;
    status = store.Set(absl::StrCat(prefix, "up/", rank), endpoints);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(what, ": store: ", status.message()));
    }
    auto ups = StoreAllGather(store, Keys(prefix, "up", size), global_ranks,
                            deadline, what,
                            "did not finish connecting their pairs",
                            &out.store_round_trips);
    if (!ups.ok()) return ups.status();
    out.barrier_round_trips = out.store_round_trips - before_barrier;
    for (int i = 0; i < size; ++i) {
      if (i != rank && absl::StartsWith((*ups)[i], "!")) {
        return absl::UnavailableError(absl::StrCat(
            what, ": global rank ", global_ranks[i],
            " failed to connect its pairs: ",
            absl::string_view((*ups)[i]).substr(1)));
      }
    }
    for (int i = 0; i < size; ++i) {
      if (i == rank) continue;
      for (absl::string_view line :
           absl::StrSplit((*ups)[i], '\n', absl::SkipEmpty())) {
        std::pair<absl::string_view, absl::string_view> kv =
            absl::StrSplit(line, absl::MaxSplits(' ', 1));
        int peer_of = -1;
        if (absl::SimpleAtoi(kv.first, &peer_of) && peer_of == rank) {
          out.peer_endpoints[std::string(kv.second)] = global_ranks[i];
        }
      }
    }
  }
  auto context =
      std::make_shared<InstalledContext>(rank, size, device, transport);
  context->setTimeout(absl::ToChronoMilliseconds(timeout));
  out.context = std::move(context);
  return out;
}

}  // namespace gloo_internal
}  // namespace devmesh
