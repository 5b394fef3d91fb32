// devmesh/comm/gloo/gloo_sync_allreduce.h
// -----------------------------------------------------------------------------
// Small and mid-size all-reduces of a Gloo group over synchronous pairs.
//
// Gloo's TCP pairs normally run on its event loop thread: a message is read
// there and the caller is woken through a condition variable, two thread
// hand-offs per message. Pair::setSync(true, false) instead makes the socket
// blocking and reads it on the calling thread: faster for small messages,
// slower for large ones (docs/gloo_sync_pairs.txt,
// docs/cross_host_bench.txt); kGlooSyncMaxBytes (256 KiB) bounds it for
// another reason, said there.
//
// Gloo's synchronous pairs take only its pair-bound Buffer algorithms
// (gloo::AllreduceBcube here), never its unbound-buffer ones
// (gloo::allreduce, send/recv), and setSync is one-way.
// So a group that uses them holds a second mesh of pairs (its own
// gloo::Context): ConnectFullMesh's SyncSubMesh, made with the group's
// first mesh in the same store exchange, connections, deadline, cancel
// check and barrier (no store round trip of its own). Its pairs turn
// synchronous before the barrier: a partner that has passed the barrier may
// send at once, and a message reaching a pair still in Gloo's loop before
// its Buffer exists makes the loop retry it on every turn.
//
// Gloo's Buffer algorithms fix their buffer and count when built, so each
// (count, dtype, op) gets one algorithm over a staging buffer of its own
// (the caller's data is copied in and out). Algorithms are kept in a cache of at
// most kSyncCacheEntries entries and kSyncCacheBytes of staging, least
// recently used first out; every member makes the same calls in the same
// order, so every member builds and drops the same algorithms at the same
// call, which keeps Gloo's slot numbers (Context::nextSlot) equal across
// members. Each build takes 2 n (n - 1) slots of Gloo's int counter; when
// the next build would pass kSyncSlotBudget the group stops using this
// route for good (on every member at the same call) and all-reduces go
// back to Gloo's event-loop route.
//
// Algorithm: Gloo's bcube (recursive halving and doubling, 2 log2(n)
// steps), so the route is for groups whose size n is a power of two (2, 4,
// 8, ...; others keep the event-loop route), and its mesh holds only the
// pairs bcube uses: rank r with r XOR 2^k, log2(n) connections per member
// (O(log n) more bytes in the group's own store round trips), not n - 1.
//
// Which groups: DEVMESH_GLOO_SYNC_ROUTE (read once per process; the same on
// every member): "auto" or unset, groups that cross hosts (a member's Gloo
// address is on another host: gloo_full_mesh.h, FullMesh::crosses_hosts;
// inside one host devmesh's groups are shared memory, and a Gloo group
// there keeps its n - 1 connections); "1",
// every power-of-two Gloo group (tests; a Gloo group inside one host); "0",
// none.
//
// Bounds and faults: every blocking read and write has the group's timeout
// (SO_RCVTIMEO / SO_SNDTIMEO, set by Gloo from the context timeout): past
// it Gloo throws "Read timeout" (DeadlineExceeded through GlooCall). A peer
// that dies closes or resets its sockets: the blocked read returns at once
// with Gloo's "Connection closed by peer" / "Read error" (Unavailable). Abort
// shuts the sockets down (gloo_shutdown.h): a read blocked on this thread or
// any later read or write fails at once, on this member and, through the
// closed connection, on its peers.
//
// Thread-safety: one Run at a time (the communicator's rule); Abort may be
// called from any thread at any time.
#ifndef DEVMESH_COMM_GLOO_GLOO_SYNC_ALLREDUCE_H_
#define DEVMESH_COMM_GLOO_GLOO_SYNC_ALLREDUCE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/dtype.h"
#include "comm/gloo/gloo_full_mesh.h"
#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "store/store.h"

namespace devmesh {
namespace gloo_internal {

// All-reduces of at most this many bytes take the synchronous route; larger
// ones Gloo's event-loop route. The bound is set by deadlock, not speed: in
// each bcube step both partners write their whole message (blocking, on the
// calling thread) before either reads, so a message must fit in the
// sender's socket send buffer. Gloo asks SO_SNDBUF for the message size,
// which Linux caps at 2 x net.core.wmem_max: 416 KiB with the kernel's
// default 212992. The largest message is half the all-reduce, so 256 KiB
// (128 KiB messages) stays deadlock-free on a default host. Found by review
// and checked here with wmem_max and rmem_max set to 212992: a 2 MiB
// all-reduce of 2 ranks hung until killed. Speed: docs/design_figures.md
// and docs/cross_host_bench.txt.
// DEVMESH_GLOO_SYNC_MAX_BYTES may raise it (at most 2 x wmem_max of every
// member, and the same on every member).
inline constexpr size_t kGlooSyncMaxBytes = size_t{256} << 10;

// The algorithm cache's bounds (see the top of this file): entries, and
// staging bytes summed over them (Gloo's own receive buffers add about as
// much again).
inline constexpr size_t kSyncCacheEntries = 8;
inline constexpr size_t kSyncCacheBytes = size_t{16} << 20;

// Gloo slots (Context::nextSlot, an int) the route may take in all.
inline constexpr int64_t kSyncSlotBudget = int64_t{1} << 30;

// The bytes above which an all-reduce takes the event-loop route: the
// DEVMESH_GLOO_SYNC_MAX_BYTES environment variable when set to a number
// (0 turns the route off; it must be the same on every member of a group,
// like NCCL's own tuning variables, or members take different routes and
// fail at the timeout), else kGlooSyncMaxBytes. Read once per process.
size_t GlooSyncMaxBytes();

// Whether a group of `size` that does (`crosses_hosts`) or does not cross
// hosts takes the route: SyncAllreduce::SizeFits(size), and
// DEVMESH_GLOO_SYNC_ROUTE as above.
bool GlooSyncRouteWanted(int size, bool crosses_hosts);

class SyncAllreduce {
 public:
  // Sizes the route serves: powers of two from 2.
  static bool SizeFits(int size);
  // The members rank `rank` of `size` connects with: rank XOR 2^k, sorted.
  static std::vector<int> Partners(int rank, int size);

  // The route over `mesh`, a synchronous sub-mesh of the group's partners
  // (ConnectFullMesh's SyncSubMesh with Partners(rank, size), made with
  // the group's mesh in the same store round trips). Requires
  // SizeFits(size). Never throws.
  static std::unique_ptr<SyncAllreduce> FromMesh(int rank, int size,
                                                 FullMesh mesh);

  ~SyncAllreduce();
  SyncAllreduce(const SyncAllreduce&) = delete;
  SyncAllreduce& operator=(const SyncAllreduce&) = delete;

  // False once the slot budget is spent (the same call on every member),
  // and for a count above INT_MAX (Gloo counts in int): the caller then
  // uses its other route. Count in elements.
  bool Fits(size_t count, DataType dtype, ReduceOp op) const;

  // out[i] = the reduction over members of in[i] for i < count (`in` may
  // equal `out`; otherwise they must not overlap). kAvg reduces as kSum
  // (the caller divides). Requires Fits(count, dtype, op). Throws Gloo's
  // exceptions, and std::runtime_error for every call after one whose
  // algorithm failed to build: call under GlooCall.
  void Run(const void* in, void* out, size_t count, DataType dtype,
           ReduceOp op);

  // Shuts every connection down and closes the pairs; Run fails from then
  // on. Idempotent.
  void Abort();

  // "[ip]:port" of each peer's end of its connection -> global rank.
  const std::map<std::string, int>& peer_endpoints() const {
    return peer_endpoints_;
  }
  // Algorithms built so far (cache misses), for tests.
  int64_t builds() const { return builds_; }

 private:
  struct Entry {
    size_t count = 0;
    DataType dtype = DataType::kFloat32;
    ReduceOp op = ReduceOp::kSum;
    size_t bytes = 0;
    std::vector<uint64_t> staging;  // 8-byte aligned for every dtype
    std::function<void(void*, const void*, const void*, size_t)> reduce;
    std::unique_ptr<::gloo::Algorithm> algorithm;
  };

  SyncAllreduce() = default;
  // Slots one build takes: 2 n (n - 1).
  int64_t SlotsPerBuild() const;
  Entry& Lookup(size_t count, DataType dtype, ReduceOp op);

  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<::gloo::Context> context_;
  std::map<std::string, int> peer_endpoints_;
  std::map<int, ino_t> connections_;
  std::list<Entry> cache_;  // most recently used first
  size_t cache_bytes_ = 0;
  int64_t slots_used_ = 0;
  int64_t builds_ = 0;
  std::atomic<bool> aborted_{false};
  // An algorithm failed to build (Gloo threw, or no memory): this member's
  // slots no longer match its peers', so every later Run throws.
  bool broken_ = false;
};

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_SYNC_ALLREDUCE_H_
