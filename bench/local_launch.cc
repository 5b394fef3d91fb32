// devmesh/bench/local_launch.cc
#include "bench/local_launch.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bootstrap/rendezvous.h"

namespace devmesh {

int RunRankOrLaunch(absl::string_view name,
                    const std::vector<std::string>& argv, int64_t nproc,
                    CpuBind cpu_bind, absl::FunctionRef<int()> run_rank) {
  if (HasRendezvousEnv()) return run_rank();
  if (nproc < 1 || nproc > 4096) {
    std::fprintf(stderr, "%s: the mesh must have 1 to 4096 ranks, not %lld\n",
                 std::string(name).c_str(), static_cast<long long>(nproc));
    return 2;
  }
  LaunchOptions launch;
  launch.nproc = static_cast<int>(nproc);
  launch.cpu_bind = cpu_bind;
  launch.argv = argv;
  launch.argv[0] = "/proc/self/exe";
  absl::StatusOr<int> code = LaunchLocal(launch);
  if (!code.ok()) {
    std::fprintf(stderr, "%s: %s\n", std::string(name).c_str(),
                 code.status().ToString().c_str());
    return 1;
  }
  return *code;
}

}  // namespace devmesh
