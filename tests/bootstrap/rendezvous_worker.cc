// A rank of the launcher and rendezvous tests: joins the job from the
// environment (Bootstrap::FromEnv), sets its key, reads every rank's key, and
// exits 0 when all are right. With WORKER_FAIL_RANK=r, rank r exits 3 right
// after joining; the others then block in a Get that only a kill ends.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "bootstrap/bootstrap.h"

int main() {
  devmesh::BootstrapOptions options;
  options.timeout = absl::Seconds(60);
  auto boot = devmesh::Bootstrap::FromEnv(options);
  if (!boot.ok()) {
    std::fprintf(stderr, "bootstrap failed: %s\n", boot.status().ToString().c_str());
    return 1;
  }
  devmesh::Bootstrap& b = **boot;
  const char* fail = std::getenv("WORKER_FAIL_RANK");
  if (fail != nullptr && std::atoi(fail) == b.rank()) {
    std::printf("failing on purpose\n");
    return 3;
  }
  if (fail != nullptr) {
    (void)b.store()->Get("never-set", absl::Hours(1));
    return 4;
  }
  auto store = b.store();
  if (absl::Status s = store->Set(absl::StrCat("rank/", b.rank()),
                                  absl::StrCat("v", b.rank()));
      !s.ok()) {
    std::fprintf(stderr, "set failed: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int r = 0; r < b.world_size(); ++r) {
    auto v = store->Get(absl::StrCat("rank/", r));
    if (!v.ok() || *v != absl::StrCat("v", r)) {
      std::fprintf(stderr, "rank %d: bad key of rank %d: %s\n", b.rank(), r,
                   v.ok() ? v->c_str() : v.status().ToString().c_str());
      return 1;
    }
  }
  std::printf("rank %d of %d read all %d keys\n", b.rank(), b.world_size(), b.world_size());
  return 0;
}
