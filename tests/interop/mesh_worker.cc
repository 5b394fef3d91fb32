// A devmesh rank for the torchrun tests (started with torchrun --no-python).
//   mesh_worker mesh     a (2, 2) mesh ("dp", "tp") over Gloo from the
//                        environment; one float all-reduce (sum) along each
//                        dim, checked against the sum of (rank + 1) over the
//                        group's global ranks; prints one line per dim and
//                        whether torchrun's agent store was used.
//   mesh_worker restart  attempt 0 (TORCHELASTIC_RESTART_COUNT): rank 0 sets
//                        "marker", all ranks meet, then rank 1 exits 3.
//                        attempt 1: "marker" must be invisible, while the raw
//                        agent store still holds attempt 0's copy of it.
//   mesh_worker mixed    ranks 1..3 of a job whose rank 0 is Python
//                        (mixed_rank.py): sets "from_devmesh/<rank>" in the
//                        agent store (devmesh's namespace), reads "from_torch".
// Exit 0 when every check held.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "bootstrap/bootstrap.h"
#include "comm/communicator.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"

namespace devmesh {
namespace {

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "mesh_worker: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  return 1;
}

int Mesh() {
  absl::StatusOr<RendezvousInfo> info = RendezvousInfoFromEnv();
  if (!info.ok()) return Fail("rendezvous", info.status());
  absl::StatusOr<DeviceMesh> mesh = InitDeviceMesh("cpu", {2, 2}, {"dp", "tp"});
  if (!mesh.ok()) return Fail("InitDeviceMesh", mesh.status());
  for (const char* dim : {"dp", "tp"}) {
    auto group = mesh->GetGroup(std::string(dim));
    if (!group.ok()) return Fail(dim, group.status());
    float value = static_cast<float>(info->rank + 1), sum = 0;
    if (absl::Status s = (*group)->AllReduce(&value, &sum, 1,
                                             DataType::kFloat32, ReduceOp::kSum);
        !s.ok()) {
      return Fail(absl::StrCat("all-reduce along ", dim), s);
    }
    float want = 0;
    for (int r : (*group)->global_ranks()) want += static_cast<float>(r + 1);
    if (sum != want) {
      std::fprintf(stderr, "rank %d dim %s: sum %g, want %g\n", info->rank,
                   dim, sum, want);
      return 1;
    }
    std::printf("rank %d dim %s sum %g ok\n", info->rank, dim, sum);
  }
  std::printf("rank %d agent_store %d\n", info->rank,
              info->use_agent_store ? 1 : 0);
  return 0;
}

int Restart() {
  absl::StatusOr<RendezvousInfo> info = RendezvousInfoFromEnv();
  if (!info.ok()) return Fail("rendezvous", info.status());
  if (!info->use_agent_store) {
    return Fail("restart", absl::FailedPreconditionError("no agent store"));
  }
  BootstrapOptions options;
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<Bootstrap>> boot = Bootstrap::Create(*info, options);
  if (!boot.ok()) return Fail("bootstrap", boot.status());
  Store& store = *(*boot)->store();
  const char* attempt_env = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const int attempt = attempt_env ? std::atoi(attempt_env) : 0;
  if (attempt == 0) {
    if (info->rank == 0) {
      if (absl::Status s = store.Set("marker", "attempt 0"); !s.ok()) {
        return Fail("set marker", s);
      }
    }
    if (absl::Status s = (*boot)->Barrier("marked"); !s.ok()) {
      return Fail("barrier", s);
    }
    if (info->rank == 1) {
      std::printf("rank 1 fails attempt 0 on purpose\n");
      std::fflush(stdout);
      std::_Exit(3);
    }
    // The others wait to be stopped by torchrun.
    (void)store.Get("never-set", absl::Seconds(60));
    return 4;
  }
  absl::StatusOr<bool> seen = store.Check({"marker"});
  if (!seen.ok()) return Fail("check marker", seen.status());
  // The raw agent store still has attempt 0's marker: only the namespace
  // hides it.
  RendezvousInfo raw_info = *info;
  raw_info.store_namespace =
      absl::StrCat(info->store_namespace.substr(
                       0, info->store_namespace.rfind('/')),
                   "/attempt_0");
  absl::StatusOr<std::shared_ptr<Store>> raw = ConnectAgentStore(raw_info, options);
  if (!raw.ok()) return Fail("raw store", raw.status());
  absl::StatusOr<std::string> old = (*raw)->Get("marker", absl::Seconds(5));
  if (*seen || !old.ok() || *old != "attempt 0") {
    std::fprintf(stderr, "rank %d attempt %d: marker seen=%d, attempt 0's: %s\n",
                 info->rank, attempt, *seen ? 1 : 0,
                 old.ok() ? old->c_str() : old.status().ToString().c_str());
    return 1;
  }
  std::printf("rank %d attempt %d (%s) sees no attempt 0 keys\n", info->rank,
              attempt, info->store_namespace.c_str());
  return 0;
}

int Mixed() {
  absl::StatusOr<RendezvousInfo> info = RendezvousInfoFromEnv();
  if (!info.ok()) return Fail("rendezvous", info.status());
  BootstrapOptions options;
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::shared_ptr<Store>> store = ConnectAgentStore(*info, options);
  if (!store.ok()) return Fail("agent store", store.status());
  if (absl::Status s = (*store)->Set(absl::StrCat("from_devmesh/", info->rank),
                                     absl::StrCat("d", info->rank));
      !s.ok()) {
    return Fail("set", s);
  }
  absl::StatusOr<std::string> torch = (*store)->Get("from_torch");
  if (!torch.ok()) return Fail("get from_torch", torch.status());
  if (*torch != "t0") {
    return Fail("from_torch", absl::InternalError(*torch));
  }
  std::printf("rank %d read from_torch=%s\n", info->rank, torch->c_str());
  return 0;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "mesh";
  if (mode == "mesh") return devmesh::Mesh();
  if (mode == "restart") return devmesh::Restart();
  if (mode == "mixed") return devmesh::Mixed();
  std::fprintf(stderr, "mesh_worker: unknown mode %s\n", mode.c_str());
  return 2;
}
