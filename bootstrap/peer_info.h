// devmesh/bootstrap/peer_info.h
// -----------------------------------------------------------------------------
// The start-up exchange of what each rank believes about the job, and where
// it runs. Every rank publishes a PeerInfo (its rank, the world size and
// local sizes its launcher gave it, its host name, the address through which
// it reaches the store, and the store address it was given); rank 0 checks
// that they agree and publishes one verdict: either the table of every rank's
// PeerInfo, or the first disagreement, which every rank then returns. A rank
// started with the wrong WORLD_SIZE, a rank index used twice, or a different
// store address is reported on every rank within about a second of the last
// rank joining, not after the bootstrap timeout (PyTorch only finds these by
// timing out).
//
// Bootstrap::Create runs the exchange in place of a plain start barrier (it
// is one: no rank returns before every rank has joined), so
// Bootstrap::peers() is how a rank learns which host every other rank is on.
//
// Store keys (under the store given, one job per store or prefix):
//   devmesh/peers/rank/<r>   rank r's encoded PeerInfo (CompareSet: first
//                            wins); set means rank r joined
//   devmesh/peers/verdict    "ok:" + the table, or "error:" + the message
//   devmesh/peers/read       counter of ranks that read an error verdict
//                            (WaitForVerdictReaders; not on etcd)
// No key is written by every rank but its own: the join is the claim, rank 0
// waits for every claim, the others for rank 0's claim and then the verdict.
// Round trips per rank when every rank is there: 5 (claim; wait for and read
// rank 0's claim; wait for and read the verdict); rank 0: 4 (claim, one Wait
// and one MultiGet of world_size keys, the verdict's CompareSet); plus one
// Check of the verdict per half second that a claim is waited for. A wait
// for the verdict itself is one Wait per progress period (30 s).
// Bytes: every rank reads the verdict, O(world_size) with host names and
// addresses stored once each.
//
// Thread-safety: pure functions, as safe as the store.
#ifndef DEVMESH_BOOTSTRAP_PEER_INFO_H_
#define DEVMESH_BOOTSTRAP_PEER_INFO_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace devmesh {

struct PeerInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int64_t pid = 0;
  std::string hostname;  // gethostname() of the rank's host
  // The IP literal (no brackets) of the local end of a route from this rank
  // to the store: the address its peers can reach it at (as NCCL picks the
  // interface that reaches its peers). Empty when it could not be found.
  std::string address;
  std::string store;  // "host:port" of the store, as this rank was given it

  friend bool operator==(const PeerInfo& a, const PeerInfo& b) {
    return a.rank == b.rank && a.world_size == b.world_size &&
           a.local_rank == b.local_rank &&
           a.local_world_size == b.local_world_size && a.pid == b.pid &&
           a.hostname == b.hostname && a.address == b.address &&
           a.store == b.store;
  }
};

// Bytes of `info` (length-prefixed fields) and back. DecodePeerInfo:
// InvalidArgument on truncated or malformed bytes.
std::string EncodePeerInfo(const PeerInfo& info);
absl::StatusOr<PeerInfo> DecodePeerInfo(absl::string_view bytes);

// The table of every rank's PeerInfo (host names, addresses and the store
// stored once each) and back; Decode: InvalidArgument on bad bytes.
std::string EncodePeerTable(const std::vector<PeerInfo>& peers);
absl::StatusOr<std::vector<PeerInfo>> DecodePeerTable(absl::string_view bytes);

// This host's name (gethostname), or "unknown-host".
std::string LocalHostName();

// The local IP this process would use to reach `host`:`port` (a UDP socket
// connected there, which sends nothing; then getsockname). `host` may be a
// name or an IP literal, IPv6 in brackets or bare. Errors: InvalidArgument
// when `host` does not resolve; Unavailable when no route leads there.
absl::StatusOr<std::string> LocalAddressToward(absl::string_view host,
                                               int port);

// Runs the exchange (see the top of this file): publishes `self` under
// devmesh/peers/rank/<self.rank>, waits until self.world_size ranks have
// joined (rank 0) or for rank 0's verdict (the others), and returns every rank's PeerInfo indexed by rank. Every rank of
// the job must call it once with the same store.
// Errors, on every rank that takes part:
//   InvalidArgument when ranks disagree: a world size, the store address, or
//     a rank index claimed twice (the message names both ranks or processes
//     and both values); also for a `self` that is bad on its own (rank
//     outside [0, world_size), world_size < 1).
//   DeadlineExceeded when not every rank joins within `timeout` (the message
//     says how many did, "at least N" when counting them would have taken
//     over 128 Checks, and names up to 8 missing ranks).
//   FailedPrecondition, on this process only, when its rank index is held
//     by a job whose rendezvous already completed in this store ("another
//     job is using this store", naming that job's process): that job's keys
//     are left as they are.
//   Unavailable when the launcher that hosts the store reported a rank's
//     process ended before the rendezvous completed
//     (ReportEndBeforeRendezvous): "rendezvous failed: rank 2 (pid 4711)
//     exited with code 3 before the rendezvous completed (reported by the
//     launcher)", within about half a second of the report.
//   The store's errors (Unavailable when the store is gone).
absl::StatusOr<std::vector<PeerInfo>> ExchangePeerInfo(Store& store,
                                                       const PeerInfo& self,
                                                       absl::Duration timeout);

// The table of a rendezvous that completed in `store` (every rank's
// PeerInfo, indexed by rank), for a process that joins the running job
// without taking part in the exchange (a spare, device_mesh/spare_runtime.h);
// std::nullopt when no rendezvous completed there (no verdict yet, or one
// that failed). One round trip; does not wait.
// Errors: InvalidArgument for a verdict that does not decode; the store's.
absl::StatusOr<std::optional<std::vector<PeerInfo>>> ReadPeerTable(
    Store& store);

// For whoever hosts the store and sees a rank's process end (the launcher,
// bootstrap/launcher.h): unless the rendezvous in `store` has a verdict
// already, makes "<what> before the rendezvous completed" its verdict, so
// that every rank still in ExchangePeerInfo fails at once with Unavailable
// naming it instead of waiting out its timeout. `what` names the process
// ("rank 2 (pid 4711) exited with code 3"). Returns true when the
// rendezvous had not completed (this report or an earlier verdict of
// failure stands), false when it had completed (nothing changed: a later
// exit is not the rendezvous's concern). Errors: the store's. Thread-safety:
// any thread.
absl::StatusOr<bool> ReportEndBeforeRendezvous(Store& store,
                                               absl::string_view what);

// For a rank 0 that hosts the store and got InvalidArgument or
// DeadlineExceeded from ExchangePeerInfo: waits (at most `timeout`) until
// every other rank that joined (claimed a rank below `world_size`) has read
// the verdict, so that stopping the server does not turn their
// InvalidArgument into Unavailable. Store errors end the wait.
void WaitForVerdictReaders(Store& store, int world_size,
                           absl::Duration timeout);

}  // namespace devmesh

#endif  // DEVMESH_BOOTSTRAP_PEER_INFO_H_
