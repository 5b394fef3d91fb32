// devmesh/comm/gloo/gloo_full_mesh.cc
#include "comm/gloo/gloo_full_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_device.h"
#include "comm/gloo/gloo_loop_waker.h"
#include "comm/gloo/gloo_status.h"
#include "comm/store_exchange.h"
#include "gloo/transport/context.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/address.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace gloo_internal {
namespace {

using comm_internal::StoreAllGather;

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

// How often the watchdog asks the creation's cancel check (CommOptions::
// creation_cancel): a local call, so a short period costs nothing.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(100);

// Closes every pair when `deadline` passes before Stop(), or when `cancel`
// (asked every kCancelPoll; may be empty) returns an error. Gloo's pair
// connect waits up to 5 x its timeout and has no abort: closing the pair
// (Pair::close, under the pair's own lock) wakes the waiting thread.
class Watchdog {
 public:
  Watchdog(std::vector<::gloo::transport::Pair*> pairs, absl::Time deadline,
           std::function<absl::Status()> cancel,
           std::shared_ptr<LoopWaker> waker)
      : pairs_(std::move(pairs)), deadline_(deadline),
        cancel_(std::move(cancel)), waker_(std::move(waker)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watchdog() { Stop(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      sync_internal::MutexLock lock(&mu_);
      done_ = true;
    }
    cv_.SignalAll();
    if (thread_.joinable()) thread_.join();
  }
  bool fired() ABSL_LOCKS_EXCLUDED(mu_) {
    sync_internal::MutexLock lock(&mu_);
    return fired_;
  }
  // The cancel check's error when it closed the pairs; OK otherwise (also
  // when the deadline did).
  absl::Status cancelled() ABSL_LOCKS_EXCLUDED(mu_) {
    sync_internal::MutexLock lock(&mu_);
    return cancelled_;
  }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      sync_internal::MutexLock lock(&mu_);
      while (true) {
        const absl::Time wake =
            cancel_ ? std::min(deadline_, absl::Now() + kCancelPoll)
                    : deadline_;
        while (!done_) {
          if (cv_.WaitWithDeadline(&mu_, wake)) break;
        }
        if (done_) return;
        if (absl::Now() >= deadline_) break;
        // The condition variable's clock may run a little ahead of absl's:
        // without a check, wait again until the deadline has passed.
        if (!cancel_) continue;
        mu_.Unlock();
        absl::Status s = cancel_();
        mu_.Lock();
        if (done_) return;
        if (!s.ok()) {
          cancelled_ = std::move(s);
          break;
        }
      }
      fired_ = true;
    }
    ScopedLoopKick kick(waker_);  // each close waits for a loop turn
    for (::gloo::transport::Pair* pair : pairs_) {
      // Close never throws for a listening or connecting pair; stay safe.
      (void)GlooCall("gloo connect watchdog: close", [&] { pair->close(); });
    }
  }

  const std::vector<::gloo::transport::Pair*> pairs_;
  const absl::Time deadline_;
  const std::function<absl::Status()> cancel_;
  const std::shared_ptr<LoopWaker> waker_;
  sync_internal::Mutex mu_;
  sync_internal::CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Whether this side of a pair is the one that connects (Gloo's TCP rule in
// Pair::connect: the side whose listening address `self` compares greater
// than the peer's `peer`, by IP bytes and then port, connects; the other
// only waits for the accept).
bool ConnectingSide(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  int rv = 0;
  if (a.ss_family == AF_INET) {
    const auto* sa = reinterpret_cast<const sockaddr_in*>(&a);
    const auto* sb = reinterpret_cast<const sockaddr_in*>(&b);
    rv = std::memcmp(&sa->sin_addr, &sb->sin_addr, sizeof(in_addr));
    if (rv == 0) rv = sa->sin_port - sb->sin_port;
  } else if (a.ss_family == AF_INET6) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&a);
    const auto* sb = reinterpret_cast<const sockaddr_in6*>(&b);
    rv = std::memcmp(&sa->sin6_addr, &sb->sin6_addr, sizeof(in6_addr));
    if (rv == 0) rv = sa->sin6_port - sb->sin6_port;
  }
  return rv > 0;
}

// "<prefix><kind>/<from>/<to>": what group rank `from` publishes for `to`.
std::string PairKey(const std::string& prefix, absl::string_view kind,
                    int from, int to) {
  return absl::StrCat(prefix, kind, "/", from, "/", to);
}

// Whether two device addresses are on one host as far as addresses tell:
// both loopback (127.0.0.0/8, ::1: devmesh gives each process a loopback
// address of its own on one host, gloo_device.h), or the same address.
bool IsLoopback(const sockaddr_storage& x) {
  if (x.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&x);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (x.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&x);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
  }
  return false;
}

bool SameHost(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (IsLoopback(a) && IsLoopback(b)) return true;
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b)->sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(&b)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  }
  return false;
}

// The keys rank `rank` publishes (one per peer) and the keys it reads (each
// peer's key for it), with the peers' global ranks in the same order: every
// rank moves O(size) bytes, never another member's entries for third ranks.
struct PairKeys {
  std::vector<std::string> mine;
  std::vector<std::string> theirs;
  std::vector<int> peers;         // group ranks, ascending
  std::vector<int> peer_globals;  // their global ranks
};

PairKeys KeysFor(const std::string& prefix, absl::string_view kind, int rank,
                 int size, const std::vector<int>& global_ranks,
                 const std::vector<bool>& wanted) {
  PairKeys k;
  for (int i = 0; i < size; ++i) {
    if (i == rank || !wanted[i]) continue;
    k.mine.push_back(PairKey(prefix, kind, rank, i));
    k.theirs.push_back(PairKey(prefix, kind, i, rank));
    k.peers.push_back(i);
    k.peer_globals.push_back(global_ranks[i]);
  }
  return k;
}

}  // namespace

namespace {

// One mesh's share of the creation: its transport context, its pairs (by
// group rank) and its keys.
struct MeshPart {
  std::shared_ptr<AbortableContext> abortable;
  std::vector<::gloo::transport::Pair*> pairs;  // by group rank; null: none
  PairKeys addr_keys;
  PairKeys up_keys;
  std::vector<std::string> my_addresses;  // in addr_keys order
  std::vector<ConnectionEnd> ends;
  std::map<std::string, int> peer_endpoints;
};

}  // namespace

std::string EndpointName(const ::gloo::transport::Address& address) {
  std::string name = address.str();
  if (size_t seq = name.find('$'); seq != std::string::npos) name.resize(seq);
  return name;
}

absl::Status ConnectLinks(
    const std::string& what, const std::vector<MeshLink>& links,
    const std::shared_ptr<::gloo::transport::Device>& device,
    absl::Duration timeout, absl::Time deadline,
    const std::function<absl::Status()>& cancel, bool* watchdog_fired) {
  if (watchdog_fired != nullptr) *watchdog_fired = false;
  if (links.empty()) return absl::OkStatus();
  std::vector<::gloo::transport::Pair*> live;
  for (const MeshLink& l : links) live.push_back(l.pair);
  const std::shared_ptr<LoopWaker> waker = LoopWakerFor(device.get());
  Watchdog watchdog(live, deadline, cancel, waker);
  // Connect the pairs this rank connects first, then wait for those its
  // peers connect: a connect completes without the peer's main thread
  // (its event loop accepts), so a rank never sits waiting for a peer
  // that is itself still working through lower indices of its own list
  // (index order made such waits chain along the group). Measured at 256
  // ranks on one host (farm-bench, 8 pairs): wall 0.86x of index order,
  // interval 0.72-1.52, within the machine's noise.
  std::vector<size_t> order;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < links.size(); ++k) {
      if (links[k].connects == (pass == 0)) order.push_back(k);
    }
  }
  absl::Status status;
  size_t reached = 0;  // position in `order` of the pair being connected
  std::vector<bool> tried(links.size(), false);
  for (size_t k = 0; k < order.size(); ++k) {
    const MeshLink& link = links[order[k]];
    // After a failure, still make the connects this side makes (they end
    // at once: the peer's loop accepts, or the kernel refuses), so that a
    // live peer waiting for this rank is not left to its timeout naming
    // this rank; skip the waits for the others.
    if (!status.ok() && !link.connects) break;
    reached = k;
    if (watchdog.fired()) break;
    tried[order[k]] = true;
    absl::Status one;
    if (link.address.empty()) {
      one = WithPeer(absl::InternalError(absl::StrCat(
                         what, ": global rank ", link.global,
                         " published an empty address for this rank")),
                     link.global);
    } else {
      std::vector<char> addr(link.address.begin(), link.address.end());
      // On the side that connects, Gloo first takes the pair's own
      // listening socket out of its loop and waits for a loop turn: wake
      // the loop (gloo_loop_waker.h). The other side only waits for the
      // loop thread's accept, which needs no turn.
      ScopedLoopKick kick(link.connects ? waker : nullptr);
      one = WithPeer(GlooCall(absl::StrCat(what, ": connecting to global rank ",
                                           link.global),
                              [&] { link.pair->connect(addr); }),
                     link.global);
    }
    if (status.ok()) status = one;
  }
  if (!status.ok() && !watchdog.fired()) {
    // Close the pairs not waited for, so that their peers fail at once (a
    // refused or closed connection naming this rank) instead of waiting.
    ScopedLoopKick kick(waker);
    for (size_t k = 0; k < links.size(); ++k) {
      if (tried[k]) continue;
      (void)GlooCall(what, [&] { links[k].pair->close(); });
    }
  }
  if (status.ok() && !watchdog.fired()) {
    // Before the caller's barrier, so that no peer can have sent on a pair
    // while it was still in the loop: a message for a Buffer slot not yet
    // registered makes Gloo's loop retry it on every turn (level-triggered,
    // pair.cc's "busy waiting"), which at 1024 ranks kept the machine's
    // cores spinning. Each setSync takes the pair's socket out of the loop
    // and waits for a loop turn: wake the loop (gloo_loop_waker.h).
    ScopedLoopKick kick(waker);
    for (size_t k = 0; k < links.size() && status.ok(); ++k) {
      if (!links[k].sync) continue;
      status = GlooCall(
          absl::StrCat(what, ": making the pair with global rank ",
                       links[k].global, " synchronous"),
          [&] { links[k].pair->setSync(true, false); });
    }
  }
  watchdog.Stop();
  if (watchdog.fired()) {
    if (watchdog_fired != nullptr) *watchdog_fired = true;
    // Pairs before `reached` connected; the one at `reached` was being
    // waited on; the rest were not checked yet.
    const int waited =
        order.empty()
            ? -1
            : links[order[std::min(reached, order.size() - 1)]].global;
    std::vector<int> unchecked;
    for (size_t k = reached + 1; k < order.size(); ++k) {
      unchecked.push_back(links[order[k]].global);
    }
    std::sort(unchecked.begin(), unchecked.end());
    unchecked.erase(std::unique(unchecked.begin(), unchecked.end()),
                    unchecked.end());
    if (absl::Status cancelled = watchdog.cancelled(); !cancelled.ok()) {
      // The cancel's own peer (the verdict's dead rank) stays.
      absl::Status stopped = Reworded(
          cancelled,
          absl::StrCat(what,
                       ": waiting for the connection with global "
                       "rank ",
                       waited, " (pairs closed): ", cancelled.message()));
      return PeerRank(cancelled) >= 0 ? stopped
                                      : WithPeer(std::move(stopped), waited);
    }
    return WithPeer(
        absl::DeadlineExceededError(absl::StrCat(
            what, ": connection to global rank ", waited, " not made within ",
            absl::FormatDuration(timeout),
            " (pairs closed by the watchdog); pairs to global rank(s) [",
            absl::StrJoin(unchecked, ", "), "] not checked yet")),
        waited);
  }
  if (!status.ok()) {
    return WithPayloadsOf(
        absl::Status(absl::IsInternal(status) ? status.code()
                                              : absl::StatusCode::kUnavailable,
                     status.message()),
        status);
  }
  return absl::OkStatus();
}

absl::StatusOr<FullMesh> ConnectFullMesh(
    Store& store, const std::string& prefix, int rank, int size,
    const std::vector<int>& global_ranks,
    const std::shared_ptr<::gloo::transport::Device>& device,
    absl::Duration timeout, absl::Time deadline,
    const std::function<absl::Status()>& cancel,
    const std::vector<int>* only_peers, const SyncSubMesh* sync_sub) {
  std::string what = absl::StrCat(
      "gloo connect (rank ", rank, " of ", size, ", global rank ",
      global_ranks[rank], ", prefix \"", prefix, "\")");
  auto wanted_of = [&](const std::vector<int>* peers) {
    std::vector<bool> wanted(size, peers == nullptr);
    if (peers != nullptr) {
      for (int i : *peers) {
        if (i >= 0 && i < size && i != rank) wanted[i] = true;
      }
    }
    return wanted;
  };
  const std::vector<bool> wanted = wanted_of(only_peers);
  FullMesh out;
  // parts[0]: the mesh; parts[1]: the synchronous sub-mesh, when made.
  std::vector<MeshPart> parts(1);
  auto make_part = [&](MeshPart& part, const std::vector<bool>& want) {
    auto inner = device->createContext(rank, size);
    inner->setTimeout(absl::ToChronoMilliseconds(timeout));
    part.abortable = std::make_shared<AbortableContext>(
        std::move(inner), LoopWakerFor(device.get()));
    part.pairs.assign(size, nullptr);
    for (int i = 0; i < size; ++i) {
      if (i == rank || !want[i]) continue;
      auto& pair = part.abortable->createPair(i);
      part.pairs[i] = pair.get();
      std::vector<char> bytes = pair->address().bytes();
      part.my_addresses.emplace_back(bytes.data(), bytes.size());
    }
  };
  absl::Status status = GlooCall(what, [&] { make_part(parts[0], wanted); });
  if (!status.ok()) return status;
  if (sync_sub != nullptr && size > 1) {
    // Made before the exchange wherever it may be kept. Not skipped on a
    // rank whose device is on loopback: a member of the same host may
    // advertise another address (GLOO_SOCKET_IFNAME, CommOptions::gloo),
    // and then every member sees the group cross hosts and keeps it; a rank
    // that had skipped it would leave its partners waiting for its keys.
    const bool possible = sync_sub->keep == nullptr ||
                          sync_sub->keep(false) || sync_sub->keep(true);
    if (possible) {
      parts.emplace_back();
      status = GlooCall(what, [&] {
        make_part(parts[1], wanted_of(&sync_sub->peers));
      });
      if (!status.ok()) return status;
    }
  }
  if (size > 1) {
    // Name the address this rank advertises in every error below, so that a
    // rank its peers cannot reach says where they were told to connect.
    std::string advertised;
    for (auto* p : parts[0].pairs) {
      if (p == nullptr) continue;
      (void)GlooCall(what, [&] { advertised = EndpointName(p->address()); });
      break;
    }
    if (!advertised.empty()) {
      what.insert(what.size() - 1, absl::StrCat(", advertising ", advertised));
    }
    // One exchange for both parts: "addr/..." for the mesh, "sync_addr/..."
    // for the sub-mesh.
    std::vector<std::string> mine, theirs, values;
    std::vector<int> their_globals;
    for (size_t m = 0; m < parts.size(); ++m) {
      MeshPart& part = parts[m];
      std::vector<bool> want(size, false);
      for (int i = 0; i < size; ++i) want[i] = part.pairs[i] != nullptr;
      part.addr_keys = KeysFor(prefix, m == 0 ? "addr" : "sync_addr", rank,
                               size, global_ranks, want);
      part.up_keys = KeysFor(prefix, m == 0 ? "up" : "sync_up", rank, size,
                             global_ranks, want);
      mine.insert(mine.end(), part.addr_keys.mine.begin(),
                  part.addr_keys.mine.end());
      values.insert(values.end(), part.my_addresses.begin(),
                    part.my_addresses.end());
      theirs.insert(theirs.end(), part.addr_keys.theirs.begin(),
                    part.addr_keys.theirs.end());
      their_globals.insert(their_globals.end(),
                           part.addr_keys.peer_globals.begin(),
                           part.addr_keys.peer_globals.end());
    }
    ++out.store_round_trips;
    status = store.MultiSet(mine, values);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(what, ": store: ", status.message()));
    }
    DEVMESH_ASSIGN_OR_RETURN(
        std::vector<std::string> addresses,
        StoreAllGather(store, theirs, their_globals, deadline, what,
                       "did not join the group (no address published)",
                       &out.store_round_trips));

    // Per link (a pair of either part), from its peer's address (parsed
    // once, inside GlooCall: the bytes come from the store): whether this
    // side connects, the name Gloo's errors give the peer ("[ip]:port", its
    // listening address), and the socket address by which Abort finds the
    // connection (gloo_shutdown.h).
    std::vector<MeshLink> links;
    size_t at = 0;  // position in addresses
    for (size_t m = 0; m < parts.size(); ++m) {
      MeshPart& part = parts[m];
      for (size_t j = 0; j < part.addr_keys.peers.size(); ++j, ++at) {
        MeshLink link;
        link.peer = part.addr_keys.peers[j];
        link.pair = part.pairs[link.peer];
        link.global = part.addr_keys.peer_globals[j];
        link.address = addresses[at];
        link.sync = m == 1;
        const auto* self = dynamic_cast<const ::gloo::transport::tcp::Address*>(
            &link.pair->address());
        if (self != nullptr && !link.address.empty()) {
          (void)GlooCall(what, [&] {
            const ::gloo::transport::tcp::Address peer(
                std::vector<char>(link.address.begin(), link.address.end()));
            part.peer_endpoints[EndpointName(peer)] = link.global;
            link.connects =
                ConnectingSide(self->getSockaddr(), peer.getSockaddr());
            if (m == 0 && !SameHost(self->getSockaddr(), peer.getSockaddr())) {
              out.crosses_hosts = true;
            }
            link.end.peer = link.peer;
            link.end.local = !link.connects;
            link.end.addr =
                link.connects ? peer.getSockaddr() : self->getSockaddr();
            link.has_end = true;
          });
        }
        links.push_back(std::move(link));
      }
    }
    bool defer_mesh = false;
    if (parts.size() > 1) {
      if (sync_sub->keep != nullptr && !sync_sub->keep(out.crosses_hosts)) {
        // Not kept: every member decides alike (crosses_hosts is the same
        // on every member), so no peer connects to these pairs. Closing them
        // waits for a loop turn each (the context's destructor holds a
        // kick).
        parts.pop_back();
      } else {
        defer_mesh = sync_sub->defer_mesh;
      }
    }
    std::vector<MeshLink> now;
    for (MeshLink& link : links) {
      const size_t part = link.sync ? 1 : 0;  // the sub-mesh's are sync
      if (part >= parts.size()) continue;     // dropped
      if (part == 0 && defer_mesh) {
        out.pending.push_back(std::move(link));
        continue;
      }
      if (link.has_end) parts[part].ends.push_back(link.end);
      now.push_back(std::move(link));
    }
    bool fired = false;
    status = ConnectLinks(what, now, device, timeout, deadline, cancel, &fired);
    if (fired) return status;
    std::vector<std::string> up_mine, up_theirs;
    std::vector<int> up_globals;
    for (const MeshPart& part : parts) {
      up_mine.insert(up_mine.end(), part.up_keys.mine.begin(),
                     part.up_keys.mine.end());
      up_theirs.insert(up_theirs.end(), part.up_keys.theirs.begin(),
                       part.up_keys.theirs.end());
      up_globals.insert(up_globals.end(), part.up_keys.peer_globals.begin(),
                        part.up_keys.peer_globals.end());
    }
    if (!status.ok()) {
      // Tell the peers waiting in the barrier below, so that they fail now
      // (naming this rank) rather than at the deadline.
      ++out.store_round_trips;
      (void)store.MultiSet(
          up_mine, std::vector<std::string>(
                       up_mine.size(), absl::StrCat("!", status.message())));
      return status;
    }

    // Barrier: publish, for each peer, the local end of the connection with
    // it (a deferred pair's listening address); every member's endpoints
    // mean every member has connected every pair it connects now.
    std::vector<std::string> endpoints;
    status = GlooCall(what, [&] {
      for (const MeshPart& part : parts) {
        for (int i : part.up_keys.peers) {
          endpoints.push_back(part.pairs[i]->address().str());
        }
      }
    });
    if (!status.ok()) return status;
    const int64_t before_barrier = out.store_round_trips;
    ++out.store_round_trips;
    status = store.MultiSet(up_mine, endpoints);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(what, ": store: ", status.message()));
    }
    DEVMESH_ASSIGN_OR_RETURN(
        std::vector<std::string> ups,
        StoreAllGather(store, up_theirs, up_globals, deadline, what,
                       "did not finish connecting their pairs",
                       &out.store_round_trips));
    out.barrier_round_trips = out.store_round_trips - before_barrier;
    for (size_t j = 0; j < up_theirs.size(); ++j) {
      const std::string& up = ups[j];
      if (absl::StartsWith(up, "!")) {
        return WithPeer(absl::UnavailableError(
                            absl::StrCat(what, ": global rank ", up_globals[j],
                                         " failed to connect its pairs: ",
                                         absl::string_view(up).substr(1))),
                        up_globals[j]);
      }
    }
    size_t j = 0;
    for (MeshPart& part : parts) {
      for (size_t k = 0; k < part.up_keys.peers.size(); ++k, ++j) {
        part.peer_endpoints[ups[j]] = part.up_keys.peer_globals[k];
      }
    }
  }
  // Every pair is connected now: find their sockets once, for Abort.
  auto finish = [&](MeshPart& part, FullMesh& mesh) {
    if (size > 1) mesh.connections = FindConnections(part.ends);
    mesh.peer_endpoints = std::move(part.peer_endpoints);
    mesh.abortable = part.abortable;
    auto context = std::make_shared<InstalledContext>(rank, size, device,
                                                      part.abortable);
    context->setTimeout(absl::ToChronoMilliseconds(timeout));
    mesh.context = std::move(context);
  };
  finish(parts[0], out);
  if (parts.size() > 1) {
    out.sync_sub = std::make_unique<FullMesh>();
    finish(parts[1], *out.sync_sub);
    out.sync_sub->crosses_hosts = out.crosses_hosts;
  }
  return out;
}

}  // namespace gloo_internal
}  // namespace devmesh
