// Runs the README's tour (the function Tour() in its C++ block) on 4 local
// ranks started by the //bootstrap launcher, as a user would.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bootstrap/bootstrap.h"

absl::Status Tour();  // README.md

int main(int argc, char** argv) {
  if (devmesh::HasRendezvousEnv()) {
    absl::Status s = Tour();
    if (!s.ok()) std::fprintf(stderr, "tour: %s\n", s.ToString().c_str());
    return s.ok() ? 0 : 1;
  }
  devmesh::LaunchOptions launch;
  launch.nproc = 4;
  launch.argv = {"/proc/self/exe"};
  for (int i = 1; i < argc; ++i) launch.argv.push_back(argv[i]);
  auto code = devmesh::LaunchLocal(launch);
  if (!code.ok()) {
    std::fprintf(stderr, "tour_test: %s\n", code.status().ToString().c_str());
    return 1;
  }
  std::printf("tour_test: 4 ranks exited with %d\n%s\n", *code,
              *code == 0 ? "1 passed, 0 failed" : "0 passed, 1 failed");
  return *code;
}
