// devmesh/bench/local_launch.h
// -----------------------------------------------------------------------------
// The main() of a benchmark whose ranks form one job (collectives_2d,
// overlap): under a launcher it is one rank; run bare, it starts the job's
// ranks on this host itself, as allreduce_2d does.
//
// Thread-safety: call from main() only (it may fork and exec).
#ifndef DEVMESH_BENCH_LOCAL_LAUNCH_H_
#define DEVMESH_BENCH_LOCAL_LAUNCH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "bootstrap/launcher.h"

namespace devmesh {

// With rendezvous variables in the environment (HasRendezvousEnv: torchrun,
// Slurm, mpirun, //bootstrap:launch), runs `run_rank` and returns its exit
// status. Otherwise starts `nproc` ranks of this program (/proc/self/exe
// with `argv`, the original command line) on this host, bound as
// `cpu_bind` says (LaunchLocal), and returns the launch's exit status.
// Exit status 2, with "<name>: the mesh must have 1 to 4096 ranks" on
// stderr,
// when nproc is outside [1, 4096]; 1, with the launch's error, when the
// launch fails.
int RunRankOrLaunch(absl::string_view name,
                    const std::vector<std::string>& argv, int64_t nproc,
                    CpuBind cpu_bind, absl::FunctionRef<int()> run_rank);

}  // namespace devmesh

#endif  // DEVMESH_BENCH_LOCAL_LAUNCH_H_
