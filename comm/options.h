// devmesh/comm/options.h
// -----------------------------------------------------------------------------
// CommOptions: what CreateCommunicator needs beyond (store, rank, size).
// Value types (the one callable included); copy freely. Fields a backend does
// not use are ignored.
#ifndef DEVMESH_COMM_OPTIONS_H_
#define DEVMESH_COMM_OPTIONS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace devmesh {

// NCCL-specific options; each maps to an ncclConfig_t field (nccl.h,
// NCCL 2.28). A value of -1 (or empty string) leaves NCCL's default
// (NCCL_CONFIG_UNDEF_INT / NCCL_CONFIG_UNDEF_PTR), which NCCL then takes from
// its environment variables (NCCL_CGA_CLUSTER_SIZE, NCCL_MIN_CTAS, ...).
struct NcclOptions {
  // ncclConfig_t::blocking. devmesh always initialises non-blocking so that it
  // can enforce CommOptions::timeout; this flag sets the mode the
  // communicator keeps for collectives after init (1 = blocking calls).
  int blocking = 1;
  // ncclConfig_t::splitShare: children of Split share the parent's resources.
  int split_share = 0;
  int cga_cluster_size = -1;  // ncclConfig_t::cgaClusterSize
  int min_ctas = -1;          // ncclConfig_t::minCTAs
  int max_ctas = -1;          // ncclConfig_t::maxCTAs
  std::string net_name;       // ncclConfig_t::netName ("IB", "Socket", ...)
  // CUDA device ordinal; -1 = LOCAL_RANK from the environment when set, else
  // the calling thread's current device.
  int cuda_device = -1;
  // A cudaStream_t given as void* (so this header needs no CUDA). nullptr =
  // the communicator creates and owns a non-blocking stream of its own.
  void* stream = nullptr;
  // Wait for the stream before each collective returns (Communicator's
  // contract). false = return once enqueued; the caller synchronizes.
  bool synchronize = true;
};

// Gloo-specific options.
struct GlooOptions {
  // Address to listen on and advertise to peers. Empty = the interface named
  // by GLOO_SOCKET_IFNAME when set, else this host's name when it resolves,
  // else 127.0.0.1 (PyTorch's ProcessGroupGloo rule); a loopback address
  // chosen so becomes this process's own (comm/gloo/gloo_device.h).
  std::string hostname;
  // The local address through which this rank reaches the store (an IP
  // literal, e.g. from Bootstrap::self().address; device_mesh passes
  // PeerFacingAddress, which swaps a loopback route for the address toward
  // peers on other hosts, see device_mesh/peer_address.h). When set, and neither
  // `hostname` nor GLOO_SOCKET_IFNAME is, the device listens on and
  // advertises this address instead of what the host name resolves to: a
  // host name that resolves to loopback (Debian's "127.0.1.1 host" line)
  // would otherwise be advertised to peers on other hosts, who cannot
  // connect to it. The interface that reaches the store is the one that
  // reaches the peers, as NCCL picks its socket interface.
  std::string store_route_address;
};

struct CommOptions {
  // Bound on every blocking step: store waits, connection set-up, each
  // collective. Must be positive.
  absl::Duration timeout = absl::Seconds(300);
  // The world rank of each group rank, in group order. Empty = 0..size-1.
  // When given, its length must equal the group size.
  std::vector<int> global_ranks;
  NcclOptions nccl;
  GlooOptions gloo;
  // Asked, while a communicator is being created (by CreateCommunicator or
  // Split), during the waits that are not store calls: Gloo's pair
  // connects (about every 100 ms; comm/gloo/gloo_full_mesh.h) and NCCL's
  // non-blocking init and split (about every 50 ms). OK: go on waiting; an
  // error: the creation stops (the Gloo pairs closed, the NCCL communicator
  // aborted) and returns that error's code with a message naming the wait
  // it ended. Store waits are the store's to cut short (device_mesh wraps
  // its creation store in a CancellableStore with the same check). Empty:
  // only the timeout ends those waits. Called from the creating thread and
  // from Gloo's connect watchdog thread; it must be cheap and thread-safe.
  // A Split child inherits it. A shared-memory group made over the store
  // also asks it while its first Send or Recv with a peer connects their
  // pair (comm/shm/shm_links.h), so it must stay callable for the group's
  // life. device_mesh sets it to its failure watch's verdict (so that a
  // member that dies while its peers wait for it to connect is found after
  // the lease silence, not at the timeout).
  std::function<absl::Status()> creation_cancel;
  // What the group is for, as its per-call check names it ("mesh dim 'tp'":
  // "shm call #12 along mesh dim 'tp': the members' calls differ: ...").
  // Empty: not named. device_mesh sets it for each dim's group.
  std::string label;
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_OPTIONS_H_
