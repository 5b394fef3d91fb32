// devmesh/bootstrap/bootstrap.h
// -----------------------------------------------------------------------------
// Bootstrap: the object every devmesh program makes first. It reads (or is
// given) the rendezvous info, makes rank 0 host the TcpStoreServer on
// store_port, connects every rank's TcpStoreClient to it, and waits until all
// world_size ranks are connected, like PyTorch's init_process_group with the
// env:// rendezvous. That start barrier is the peer info exchange
// (bootstrap/peer_info.h): ranks that disagree on the world size or the store
// address, or share a rank index, fail on every rank as soon as the last one
// joins, and peers() tells every rank where every other rank runs.
//
// Under torchrun with TORCHELASTIC_USE_AGENT_STORE=True (info.use_agent_store)
// the agent already hosts a c10d TCPStore on MASTER_ADDR:MASTER_PORT, as
// PyTorch's own ranks assume: no rank binds anything, every rank (rank 0
// included) joins it with a C10dStoreClient, and store() is a PrefixStore
// over it at info.store_namespace ("devmesh/<run id>/attempt_<restart>"), so
// devmesh's keys never meet PyTorch's or a previous attempt's. The token does
// not apply then (c10d has none).
//
// With an external store (DEVMESH_STORE_ADDR, info.external_store: a
// //store:server, or //bootstrap:launch --host_store) no rank binds either:
// every rank, rank 0 included, joins it with a TcpStoreClient (the token
// applies), and rank 0 can die without taking the store with it. With an
// etcd cluster (DEVMESH_STORE_ADDR=etcd://..., info.etcd_endpoints) every
// rank joins it with an EtcdStore (store/etcd_store.h) under
// info.etcd_prefix, retrying until options.timeout while no member answers;
// the token does not apply (etcd's own authentication is not used).
//
//   // under torchrun / srun / mpirun
//   DEVMESH_ASSIGN_OR_RETURN(auto boot, devmesh::Bootstrap::FromEnv());
//   boot->store()->Set("hello", "world");
//   boot->Barrier("after-hello");
//
// Lifetime: rank 0's Bootstrap owns the server. When a Bootstrap is destroyed
// on a rank other than 0 it tells the store it has left; rank 0's destructor
// keeps the server up until every other rank has left (or
// options.shutdown_timeout passes, e.g. when a rank died), so a rank 0 that
// finishes first never strands the others. Use store() only while this
// rank's Bootstrap is alive.
// Thread-safety: accessors are immutable; store() and Barrier may be called
// from any thread (Barrier names must then be distinct per concurrent call).
//
// This header also brings in everything a user of //bootstrap needs.
#ifndef DEVMESH_BOOTSTRAP_BOOTSTRAP_H_
#define DEVMESH_BOOTSTRAP_BOOTSTRAP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sync/annotated_mutex.h"
#include "store/barrier.h"
#include "store/c10d_store_client.h"
#include "bootstrap/launcher.h"
#include "store/memory_store.h"
#include "bootstrap/peer_info.h"
#include "store/prefix_store.h"
#include "bootstrap/rendezvous.h"
#include "store/store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace devmesh {

struct BootstrapOptions {
  // How long to wait for the server (connect retries), for every rank to
  // join, and the store's default timeout for Get/Wait/Barrier.
  absl::Duration timeout = absl::Seconds(300);
  // The shared store token; unset: $DEVMESH_STORE_TOKEN, or none when that is
  // unset too. Every rank must use the same one.
  std::optional<std::string> token;
  // true: rank 0 starts the TcpStoreServer on store_port (unless
  // info.use_agent_store or info.external_store). false: a server is
  // already listening there (e.g. started by a test's parent process, see
  // bootstrap/testing/multiprocess.h) and every rank only connects.
  bool host_server = true;
  // How long rank 0's destructor waits for the other ranks to leave.
  absl::Duration shutdown_timeout = absl::Seconds(30);
  // The address rank 0's server binds ("" = dual stack, every IPv4 and IPv6
  // interface; "0.0.0.0" = every IPv4 interface only).
  std::string server_bind_host = "";
};

// The store of a torchrun job whose agent hosts it (info.use_agent_store): a
// C10dStoreClient to store_host:store_port (connect retries and default
// timeout options.timeout) under a PrefixStore at info.store_namespace.
// Errors: those of C10dStoreClient::Connect.
absl::StatusOr<std::shared_ptr<Store>> ConnectAgentStore(
    const RendezvousInfo& info, const BootstrapOptions& options);

// Counts global rank `rank` of a job of `world_size` ranks as having left
// it, as that rank's own Leave does, so that rank 0's Leave does not wait
// out options.shutdown_timeout for a rank the job knows is dead (device_mesh's
// failure watch calls it for each verdict's rank). One Set of the rank's
// own key (devmesh/bootstrap/gone/<rank>), so counting a rank again (its own
// Leave after a verdict, a rank declared dead that came back) changes
// nothing, and no key is written by every rank (on etcd, 1023 ranks adding
// to one counter at exit cost over 100,000 txns). `store` is the job's
// Bootstrap::store(). Rank 0 is never counted (its Leave is the one that
// waits for these keys). Errors: the store's (Unavailable when it is gone);
// nothing is counted then. Thread-safety: any thread, any number of ranks
// at once.
absl::Status CountAsLeft(Store& store, int rank, int world_size);

class Bootstrap {
 public:
  // RendezvousInfoFromEnv() then Create. Errors: those of both.
  static absl::StatusOr<std::unique_ptr<Bootstrap>> FromEnv(
      const BootstrapOptions& options = {});

  // Errors:
  //   InvalidArgument   rank outside [0, world_size); store_port outside
  //                     1..65535; empty store_host; ranks disagree on the
  //                     world size or the store address, or two processes
  //                     have the same rank (reported on every rank, see
  //                     ExchangePeerInfo)
  //   Unavailable       rank 0 cannot listen on store_port; the server is
  //                     not reachable within options.timeout; the peer at
  //                     store_host:store_port accepted but did not answer
  //                     the store handshake within 5 s + 20 ms per rank of
  //                     world_size (at most options.timeout); no etcd
  //                     member answered within it (names every endpoint
  //                     and its last error)
  //   PermissionDenied  token mismatch
  //   DeadlineExceeded  not every rank joined within options.timeout (the
  //                     message says how many did and which are missing)
  static absl::StatusOr<std::unique_ptr<Bootstrap>> Create(
      const RendezvousInfo& info, const BootstrapOptions& options);

  // Leaves the job (see Lifetime above).
  ~Bootstrap();

  // Leaves the job now, as the destructor does (rank 0 hosting the server:
  // waits until every other rank has left or been counted as left by
  // CountAsLeft, at most options.shutdown_timeout). For exit paths where the
  // Bootstrap is not destroyed (exit() while meshes still hold it).
  // Idempotent and thread-safe; the destructor then does nothing more. Use
  // store() no more after it on rank 0. On a rank other than 0 it costs one
  // store round trip, and with the store gone (its host died) it ends
  // within about a second (TcpStoreClient's reconnect_refused_timeout).
  void Leave();

  int rank() const { return info_.rank; }
  int world_size() const { return info_.world_size; }
  int local_rank() const { return info_.local_rank; }
  int local_world_size() const { return info_.local_world_size; }
  const RendezvousInfo& info() const { return info_; }

  // What every rank published at the start (indexed by rank): its host name,
  // the address it reaches the store from, its local rank and sizes.
  const std::vector<PeerInfo>& peers() const { return peers_; }
  // This rank's entry of peers().
  const PeerInfo& self() const { return peers_[info_.rank]; }

  // The store shared by all ranks (a TcpStoreClient, an EtcdStore, or with
  // the agent store a PrefixStore over a C10dStoreClient).
  std::shared_ptr<Store> store() const { return store_; }

  // Waits until every rank has called Barrier with the same `name` the same
  // number of times (each call uses a fresh store key: name + "/" + count).
  // Errors: as devmesh::Barrier, with options.timeout.
  absl::Status Barrier(absl::string_view name);

 private:
  Bootstrap(RendezvousInfo info, const BootstrapOptions& options)
      : info_(std::move(info)),
        timeout_(options.timeout),
        shutdown_timeout_(options.shutdown_timeout) {}

  const RendezvousInfo info_;
  const absl::Duration timeout_;
  const absl::Duration shutdown_timeout_;
  void LeaveOnce();

  bool joined_ = false;  // passed the start barrier
  std::once_flag left_;  // Leave ran
  std::vector<PeerInfo> peers_;  // set once, before Create returns
  std::unique_ptr<TcpStoreServer> server_;  // rank 0 with host_server only
  std::shared_ptr<Store> store_;            // destroyed before server_
  sync_internal::Mutex mu_;
  absl::flat_hash_map<std::string, int> barrier_counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace devmesh

#endif  // DEVMESH_BOOTSTRAP_BOOTSTRAP_H_
