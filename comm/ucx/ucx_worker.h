// devmesh/comm/ucx/ucx_worker.h
// -----------------------------------------------------------------------------
// The process's UCX worker: one UCP context and one worker per process, made
// on first use and kept for the process's life, shared by every "ucx"
// communicator (its address is what a group's members publish to each
// other). Every call into UCX on it is made under mu(); waits sleep on the
// worker's event fd (UCP_FEATURE_WAKEUP) without the lock.
//
// Configuration: UCX's own (UCX_* variables from the environment), with
// devmesh's defaults for those the environment leaves unset:
//   UCX_TLS=^sysv,posix,cma   no shared-memory transports: "ucx" groups are
//                             for members that do not share memory (inside a
//                             host, "shm" is the backend), and UCX would
//                             otherwise take shared memory between
//                             network-namespace "hosts" of one machine
//   UCX_RNDV_THRESH=inf       eager messages at every size: devmesh posts
//                             its receives before its sends, and UCX 1.13's
//                             rendezvous over TCP is slower from 32 KiB
//                             (docs/ucx_transport.md)
//   UCX_TCP_TX_SEG_SIZE=256K  UCX's TCP segments (its own default: 8 KiB);
//   UCX_TCP_RX_SEG_SIZE=256K  large messages move in fewer, larger reads
//                             and writes (docs/ucx_transport.md)
//   UCX_TCP_MAX_CONN_RETRIES=254  the most UCX accepts (its own: 25): with
//                             hundreds of ranks per host connecting at once,
//                             UCX's TCP set-up otherwise gives up on a full
//                             listen backlog and the groups time out
//                             (1024 ranks on 8 hosts, docs/ucx_transport.md)
// The three TCP settings are set in the process's environment (setenv, only
// where unset; SetUcxEnvironmentDefaults) before main in a program that
// links @devmesh//comm (comm/builtin_backends.cc), else when the worker is
// made, before UCX reads them: given through ucp_config_modify they work but
// make UCX 1.13 warn "invalid configurations" in every process. So the
// program's child processes inherit them.
// On a cluster with RDMA set UCX_TLS (for example UCX_TLS=all) and
// UCX_RNDV_THRESH (for example auto) to UCX's own choice.
// Modules: on a host without RDMA devices (/sys/class/infiniband absent or
// empty), where neither UCX_MODULES nor UCX_TLS is set, the worker also
// leaves out UCX's InfiniBand, RDMA-CM and CMA modules (UCS's global option
// MODULES=^ib,rdmacm,cma, set through ucs_global_opts_set_value before
// ucp_init, which is when UCX loads its transport modules; the environment
// variable itself is read when libucs loads, before main) and takes
// UCX_TLS=^sysv,posix (CMA is then not there to exclude). Those modules
// only probe for devices such a host does not have: ucp_init and the worker
// took 2.0-2.4 ms of CPU with them and 1.1 ms without (docs/ucx_transport.md),
// per rank, at its first cross-host group. Setting either variable keeps
// UCX's own module list.
//
// Errors (Process):
//   Unavailable  UCX could not make its context or worker (UCX's words)
//
// Thread-safety: every member function may be called from any thread. In a
// program without //comm's static initializer, the first Process() call
// writes the environment (setenv, above): a thread reading it at that moment
// (getenv) races with it, as with any setenv.
#ifndef DEVMESH_COMM_UCX_UCX_WORKER_H_
#define DEVMESH_COMM_UCX_UCX_WORKER_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <ucp/api/ucp.h>

#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace devmesh {
namespace ucx_internal {

// Sets devmesh's UCX TCP settings in the environment where unset (above).
// Not thread-safe against getenv in other threads (setenv): call it before
// the program starts threads.
void SetUcxEnvironmentDefaults();

class UcxWorker {
 public:
  // The process's worker, made by the first call (later calls return the
  // same one, or the same error).
  static absl::StatusOr<UcxWorker*> Process();

  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Hold it around every UCX call that takes handle().
  std::mutex& mu() { return mu_; }
  ucp_worker_h handle() const { return worker_; }
  // The worker's address, as bytes to publish to peers.
  const std::string& address() const { return address_; }

  // One ucp_worker_progress under mu(); returns its count of events.
  unsigned Progress();
  // Sleeps until the worker may have an event, `extra_fd` (>= 0) is
  // readable, or `timeout` has passed; returns at once when events are
  // pending. Returns true when the worker's event fd ended the sleep (or
  // events were pending), false for `extra_fd` or the timeout. With
  // `watch_worker` false the worker's fd is left out: a nap that only
  // `extra_fd` or the timeout ends (for a caller whose wakes from the worker
  // keep finding nothing to progress). Called without mu().
  bool Sleep(int extra_fd, absl::Duration timeout, bool watch_worker = true);

 private:
  UcxWorker() = default;
  // Makes the context, the worker, its event fd and address; on an error
  // releases what it made.
  absl::Status Init();
  absl::Status InitHandles();

  std::mutex mu_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::string address_;
};

}  // namespace ucx_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_UCX_UCX_WORKER_H_
