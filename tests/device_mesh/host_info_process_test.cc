// What MeshRuntimeFromBootstrap learns from the rendezvous (Bootstrap::peers()),
// in 4 real processes on this host: every rank's host name, the address its
// Gloo devices advertise (loopback: the store is on 127.0.0.1 and every peer
// is on this host), and a mesh whose dims all stay inside the host, with
// working groups. The two-host runs are in tools/launcher_check.sh.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/peer_info.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/host_layout.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

absl::Status CheckRank(Bootstrap& boot) {
  // RunRanks owns the Bootstrap; the runtime only borrows it.
  std::shared_ptr<Bootstrap> borrowed(&boot, [](Bootstrap*) {});
  auto runtime = MeshRuntimeFromBootstrap(borrowed);
  if (!runtime.ok()) return runtime.status();
  const std::vector<std::string> want_hosts(4, LocalHostName());
  if ((*runtime)->hostnames() != want_hosts) {
    return absl::InternalError(
        absl::StrCat("hostnames [", absl::StrJoin((*runtime)->hostnames(), ","),
                     "], want 4 x ", LocalHostName()));
  }
  if ((*runtime)->store_route_address() != "127.0.0.1") {
    return absl::InternalError(absl::StrCat(
        "store route address '", (*runtime)->store_route_address(),
        "', want 127.0.0.1"));
  }
  MeshOptions options;
  options.all.timeout = absl::Seconds(30);
  options.require_inside_host = {"dp", "tp"};
  auto mesh = InitDeviceMesh(*runtime, "cpu", {2, 2}, {"dp", "tp"}, options);
  if (!mesh.ok()) return mesh.status();
  auto spans = DimHostSpans(*mesh);
  if (!spans.ok()) return spans.status();
  for (const DimHostSpan& span : *spans) {
    if (!span.inside_host) {
      return absl::InternalError(absl::StrCat(span.dim, ": ", span.ToString()));
    }
  }
  // The groups work over the advertised address: sum of rank ids along tp.
  auto tp = mesh->GetGroup("tp");
  if (!tp.ok()) return tp.status();
  int64_t value = boot.rank();
  if (absl::Status s = (*tp)->AllReduce(&value, &value, 1, DataType::kInt64,
                                        ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  const int64_t want = boot.rank() < 2 ? 0 + 1 : 2 + 3;
  if (value != want) {
    return absl::InternalError(absl::StrCat("tp sum ", value, " != ", want));
  }
  return absl::OkStatus();
}

TEST(HostInfoProcessTest, RuntimeKnowsHostsAndAddress) {
  // Repetitions: $HOST_INFO_RUNS (bazel test --test_env=HOST_INFO_RUNS=20),
  // default 3.
  int runs = 3;
  if (const char* env = std::getenv("HOST_INFO_RUNS"); env != nullptr) {
    runs = std::max(1, std::atoi(env));
  }
  int failures = 0;
  for (int run = 0; run < runs; ++run) {
    absl::Status s = testing::RunRanks(4, CheckRank);
    if (!s.ok()) ++failures;
    EXPECT_TRUE(s.ok()) << "run " << run << ": " << s;
  }
  std::printf("%d runs of 4 ranks, %d failed\n", runs, failures);
}

}  // namespace
}  // namespace devmesh
