// devmesh/bootstrap/launcher.h
// -----------------------------------------------------------------------------
// LaunchLocal: starts `nproc` copies of a program on this host with torchrun's
// variables set (like `torchrun --standalone --nproc-per-node N`):
// MASTER_ADDR=127.0.0.1, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE (RANK = LOCAL_RANK = 0..nproc-1). Each line a rank writes
// is copied to the launcher's stdout/stderr prefixed "[rank N] ". When a rank
// exits non-zero or dies of a signal, the others are sent SIGTERM (their whole
// process group), then SIGKILL after `grace_period`; the launcher names the
// failing rank on stderr and returns its exit code (128 + signal for a
// signal). Each rank also dies with the launcher (PR_SET_PDEATHSIG).
// When it reaps a rank, the launcher removes the shared-memory segments that
// rank's process made and left in /dev/shm (a group set-up it was stopped
// in; comm/shm/shm_names.h); segments of processes a rank started itself are
// removed by the next devmesh process's own sweep.
// With keep_going, a failing rank stops nobody: the others run on, each
// failure is named on stderr, and the first one's code is returned once
// every rank has exited.
//
// With host_store, the launcher hosts the store itself (a TcpStoreServer in
// its own process, on MASTER_PORT, serving devmesh's and PyTorch's c10d
// protocols), as torchrun's agent does, instead of rank 0: every rank gets
// DEVMESH_STORE_ADDR=127.0.0.1:MASTER_PORT (bootstrap/rendezvous.h) and
// TORCHELASTIC_USE_AGENT_STORE=True and joins it as a client, so the store
// outlives any rank (rank 0 included) until LaunchLocal returns. Its token
// is DEVMESH_STORE_TOKEN from `env`, else from the launcher's environment.
// A rank that ends (exits or is killed) before the ranks' rendezvous has
// completed is reported to it (bootstrap/peer_info.h,
// ReportEndBeforeRendezvous): the ranks still waiting there fail within
// about half a second with Unavailable naming it ("rendezvous failed: rank 2
// (pid 4711) exited with code 3 before the rendezvous completed (reported
// by the launcher)"), rather than at their timeout with "missing ranks".
// The server runs a thread while the ranks are forked; the children only
// make async-signal-safe calls before exec.
//
// With cpu_bind = CpuBind::kCore, rank r is bound to one CPU, the
// (r mod k)-th of the k CPUs the launcher itself may run on (its
// sched_getaffinity set), like `mpirun --bind-to core --map-by core`; with
// more ranks than CPUs the mapping wraps around (mpirun's --oversubscribe).
// A bound rank and every thread it starts stay on that CPU, which removes
// migrations and cross-core scheduling from timings; torchrun binds nothing,
// and kNone (the default) leaves the ranks' affinity as inherited.
//
// Thread-safety: call from one thread at a time; it forks, so the usual rules
// about fork in a threaded process apply to the caller's other threads.
#ifndef DEVMESH_BOOTSTRAP_LAUNCHER_H_
#define DEVMESH_BOOTSTRAP_LAUNCHER_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace devmesh {

// The most ranks LaunchLocal starts on one host.
inline constexpr int kMaxLocalRanks = 4096;

// How ranks are bound to CPUs (mpirun's --bind-to): kNone leaves the
// inherited affinity; kCore pins each rank to one CPU (see above).
enum class CpuBind { kNone, kCore };

// "none" -> kNone, "core" -> kCore.
// Errors:
//   InvalidArgument  any other text (naming the text)
absl::StatusOr<CpuBind> ParseCpuBind(absl::string_view text);

struct LaunchOptions {
  int nproc = 1;                  // number of ranks, >= 1
  std::vector<std::string> argv;  // program (searched in PATH) and arguments
  // Extra environment variables for every rank (override inherited ones).
  std::vector<std::pair<std::string, std::string>> env;
  // MASTER_PORT; 0 = a free port: the launcher binds port 0 on 127.0.0.1 and
  // hands that listening socket to rank 0 (DEVMESH_STORE_LISTEN_FD, which
  // Bootstrap uses), so no other process can take the port in between.
  int master_port = 0;
  // Time between SIGTERM and SIGKILL when stopping the other ranks.
  absl::Duration grace_period = absl::Seconds(5);
  // CPU binding of the ranks.
  CpuBind cpu_bind = CpuBind::kNone;
  // The launcher hosts the store, not rank 0 (see the top of this file).
  bool host_store = false;
  // A failing rank does not stop the others (see the top of this file).
  bool keep_going = false;
  // With keep_going and host_store: a rank that fails (exits non-zero or
  // dies of a signal) is started again, up to this many times per rank,
  // with DEVMESH_SPARE=1 (device_mesh/spare_runtime.h): the program joins
  // the running job as a spare (DeviceMesh::JoinAsSpare) instead of its
  // rendezvous. A failure followed by a restart does not count in the exit
  // code; the restarted process's own end does. 0: never.
  int spare_restarts = 0;
  // Where the prefixed output goes (file descriptors; not closed).
  int stdout_fd = 1;
  int stderr_fd = 2;
};

// Runs the ranks to completion. Returns 0 when every rank exited 0, else the
// first failing rank's exit code (128 + signal number when killed).
// Errors:
//   InvalidArgument   nproc < 1 or > kMaxLocalRanks; empty argv; master_port
//                     outside 0..65535; spare_restarts negative, or above 0
//                     without keep_going and host_store
//   NotFound          a program that cannot be executed, naming it (checked
//                     once, before any rank starts)
//   PermissionDenied  a program that cannot be executed, naming it (checked
//                     once, before any rank starts)
//   Internal          pipe/fork failure; sched_getaffinity failing with
//                     kCore; the store's event loop failing to start
//   Unavailable       no free port; with host_store, master_port in use,
//                     naming it
absl::StatusOr<int> LaunchLocal(const LaunchOptions& options);

}  // namespace devmesh

#endif  // DEVMESH_BOOTSTRAP_LAUNCHER_H_
