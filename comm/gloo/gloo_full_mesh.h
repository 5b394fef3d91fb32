// devmesh/comm/gloo/gloo_full_mesh.h
// -----------------------------------------------------------------------------
// ConnectFullMesh: devmesh's own replacement for Gloo's
// gloo::rendezvous::Context::connectFullMesh, built from Gloo's public
// transport API, so that creating a group
//   1. is bounded by one deadline as a whole (Gloo's own waits a pair connect
//      for 5 x the context timeout, one pair after another, and makes one store
//      wait per peer, each with the full timeout), and
//   2. completes everywhere before it returns anywhere: after every pair is
//      connected, the members pass a store barrier (as PyTorch's new_group
//      ends with a store-based barrier). A member that returns and then exits,
//      aborts or destroys the group can no longer reset a connection that a
//      peer is still setting up (else: "Connection reset by peer" in
//      GetGroup, and an uncaught gloo::EnforceNotMet on Gloo's event-loop
//      thread when getpeername() met a reset socket). With
//      SyncSubMesh::defer_mesh only the sub-mesh is connected before the
//      barrier; the mesh's own pairs connect later (ConnectLinks, at the
//      caller's first use), so that protection then covers the sub-mesh,
//      and a mesh pair's connection set up later fails as a collective's
//      does (Unavailable naming the peer). Meanwhile those pairs listen:
//      Debian's Gloo accepts whoever connects first to a pair's port, with
//      no handshake, as it does during any creation; they are open for as
//      long as the group is unused off its route.
//
// Protocol, under `prefix` in the store, for a group of n ranks; 4 store
// round trips and O(n) bytes per rank (each rank reads only what its peers
// wrote for it, never their entries for third ranks):
//   MultiSet "addr/<rank>/<peer>"  for each peer, the address of the pair
//                                  listening for that peer
//   MultiGet "addr/<peer>/<rank>"  (waits; each peer's address for this rank)
//   -- connect every pair; a watchdog thread closes the pairs still
//      unconnected when the deadline passes (Gloo has no per-call bound) --
//   MultiSet "up/<rank>/<peer>"    the local endpoint of each connection
//   MultiGet "up/<peer>/<rank>"    (waits: the barrier; the endpoints name
//                                  the peer in later error messages)
// A synchronous sub-mesh (SyncSubMesh) adds "sync_addr/<rank>/<peer>" and
// "sync_up/<rank>/<peer>" for each of its peers to the same MultiSets and
// MultiGets.
// A rank whose pairs fail sets its "up/<rank>/<peer>" keys to "!<its error>"
// (one more round trip), so that its peers leave the barrier at once with Unavailable naming
// it, instead of waiting for the deadline.
//
// Bound: the call returns by deadline + margin, margin = the watchdog's
// close of the pairs (one Gloo event-loop tick, 10 ms, per pair still open)
// plus one store round trip. Errors: DeadlineExceeded naming the global
// ranks that had not published their addresses / not connected in time;
// Unavailable naming the peer whose connection failed (refused, reset), or
// the member that reported a failure at the barrier;
// the store's errors (prefixed). `cancel` (CommOptions::creation_cancel; may
// be empty) is asked by the watchdog every 100 ms while pairs connect: its
// error closes the pairs and is returned with its code, the message naming
// the peer being waited on (the store waits are the store's to cut short).
// Never throws.
//
// Thread-safety: one call per (store, prefix); it starts and joins one
// watchdog thread.
#ifndef DEVMESH_COMM_GLOO_GLOO_FULL_MESH_H_
#define DEVMESH_COMM_GLOO_GLOO_FULL_MESH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/gloo/gloo_abortable_context.h"
#include "comm/gloo/gloo_shutdown.h"
#include "store/store.h"
#include "gloo/context.h"
#include "gloo/transport/address.h"
#include "gloo/transport/device.h"

namespace devmesh {
namespace gloo_internal {

// One pair of a mesh and what connecting it takes: its peer, the address the
// peer published for this rank, which side connects (Gloo's rule: the
// greater listening address), and the socket address by which Abort finds
// the connection once made (gloo_shutdown.h).
struct MeshLink {
  ::gloo::transport::Pair* pair = nullptr;  // not owned: its context's
  int peer = -1;                            // group rank
  int global = -1;                          // its global rank
  std::string address;                      // Gloo's address bytes
  bool connects = false;
  bool sync = false;  // made synchronous once connected (SyncSubMesh)
  bool has_end = false;
  ConnectionEnd end;
};

struct FullMesh {
  std::shared_ptr<::gloo::Context> context;
  // Its transport context: Abort ends every wait through it
  // (gloo_abortable_context.h).
  std::shared_ptr<AbortableContext> abortable;
  // "[ip]:port" of each peer's end of its connection with this rank (as
  // Gloo prints it in its errors) -> that peer's global rank.
  std::map<std::string, int> peer_endpoints;
  int64_t store_round_trips = 0;
  // The inode of each connection's socket per peer group rank (found after
  // the barrier), for Abort (gloo_shutdown.h).
  std::map<int, ino_t> connections;
  // Of those, the barrier's (MultiSet "up/<rank>/*" + MultiGet): 2 when size > 1.
  int64_t barrier_round_trips = 0;
  // Whether a connected peer's device address is on another host than this
  // rank's: not both loopback, and not the same address (two addresses of
  // one host count as two hosts).
  bool crosses_hosts = false;
  // The synchronous sub-mesh (SyncSubMesh below), when one was asked for
  // and kept: its context, endpoints and connections (its round-trip
  // counts are 0: they are the mesh's).
  std::unique_ptr<FullMesh> sync_sub;
  // The mesh's pairs left unconnected (SyncSubMesh::defer_mesh): listening,
  // their peers' addresses known, for the caller to connect on first use
  // with ConnectLinks.
  std::vector<MeshLink> pending;
};

// A second set of pairs made in the same store exchange and barrier as the
// mesh, in a context of its own, every pair made synchronous (Gloo's
// Pair::setSync(true, false): the calling thread reads its socket) after it
// connects and before the barrier, so that no peer sends on it while it is
// still in Gloo's loop (a Buffer message that arrives before its buffer
// exists makes the loop spin until it does). It costs no store round trip
// of its own: its keys ("sync_addr/...", "sync_up/...") travel with the
// mesh's.
struct SyncSubMesh {
  // Group ranks; symmetric, as only_peers.
  std::vector<int> peers;
  // Called with FullMesh::crosses_hosts once the addresses are known (the
  // same on every member): false drops the sub-mesh (its listening pairs
  // are closed and nothing of it is connected) on every member alike.
  // Before the exchange the sub-mesh is made wherever keep(false) or
  // keep(true) (its addresses then travel with the mesh's, and it is
  // dropped after the exchange when not kept). Null: always kept. Every member must pass the
  // same `peers` relation and `keep`, or some wait for keys never written
  // and fail at the deadline naming the others.
  std::function<bool(bool crosses_hosts)> keep;
  // When the sub-mesh is kept, leave the mesh's own pairs unconnected
  // (FullMesh::pending): only the sub-mesh connects at creation, and the
  // barrier then means every member has published its addresses, made its
  // listening pairs and connected the sub-mesh.
  bool defer_mesh = false;
};

// "[ip]:port" of `address` as Gloo's error messages name an endpoint (its
// str() without the pair's "$<sequence number>"). May throw Gloo's
// exceptions (call under GlooCall).
std::string EndpointName(const ::gloo::transport::Address& address);

// Connects `links` by `deadline`: the ones this side connects first, then
// waits for the others' peers; then makes the `sync` ones synchronous. A
// watchdog closes every pair of `links` when the deadline passes or
// `cancel` (asked every 100 ms; may be empty) fails, and *watchdog_fired
// (may be null) says so. After a failed connect it still makes the
// connects this side makes (so that live peers are not left waiting for
// this rank), then closes the pairs it did not wait for (their peers fail
// at once) and returns the first error. Errors: DeadlineExceeded naming the
// global rank waited on and those not checked yet; the cancel check's code;
// Unavailable naming the peer whose connection failed; Internal for an
// empty address or a Gloo enforce failure (a pair closed under it). Never
// throws. Thread-safety: one call per set of pairs at a time.
absl::Status ConnectLinks(
    const std::string& what, const std::vector<MeshLink>& links,
    const std::shared_ptr<::gloo::transport::Device>& device,
    absl::Duration timeout, absl::Time deadline,
    const std::function<absl::Status()>& cancel, bool* watchdog_fired);

// Connects rank `rank` of `size` (global ranks `global_ranks`, for messages)
// over `device`; pairs get `timeout` as Gloo's context timeout (the default
// of later collectives). `only_peers` (group ranks; null: every other
// member) limits the mesh to those pairs: the relation must be symmetric
// (j in i's list exactly when i is in j's), keys, round trips and bytes are
// then per listed peer, and the context has no pair for the others.
// `sync_sub` (may be null) adds a synchronous sub-mesh (above) to the same
// round trips. See the top of this file for the rest.
absl::StatusOr<FullMesh> ConnectFullMesh(
    Store& store, const std::string& prefix, int rank, int size,
    const std::vector<int>& global_ranks,
    const std::shared_ptr<::gloo::transport::Device>& device,
    absl::Duration timeout, absl::Time deadline,
    const std::function<absl::Status()>& cancel = nullptr,
    const std::vector<int>* only_peers = nullptr,
    const SyncSubMesh* sync_sub = nullptr);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_FULL_MESH_H_
