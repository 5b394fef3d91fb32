// devmesh/tests/device_mesh/stopped_launch_worker.cc
// One rank of stopped_launch_test, started by LaunchLocal: prints its pid,
// makes a (2, 2) "cpu" mesh from the environment, and then either exits 3
// (the rank named by WORKER_FAIL_RANK, before any group exists) or makes
// its tp and dp groups, which wait for the failed rank until the launcher
// stops them.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"

int main() {
  const char* rank_text = std::getenv("RANK");
  const char* fail_text = std::getenv("WORKER_FAIL_RANK");
  const int rank = rank_text != nullptr ? std::atoi(rank_text) : -1;
  const int fail = fail_text != nullptr ? std::atoi(fail_text) : -1;
  std::printf("pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  auto mesh = devmesh::InitDeviceMesh("cpu", {2, 2}, {"dp", "tp"});
  if (!mesh.ok()) {
    std::fprintf(stderr, "InitDeviceMesh: %s\n",
                 mesh.status().ToString().c_str());
    return 1;
  }
  if (rank == fail) return 3;
  for (const char* dim : {"tp", "dp"}) {
    auto group = mesh->GetGroup(dim);
    if (!group.ok()) {
      std::fprintf(stderr, "GetGroup(%s): %s\n", dim,
                   group.status().ToString().c_str());
      return 1;
    }
  }
  return 0;
}
