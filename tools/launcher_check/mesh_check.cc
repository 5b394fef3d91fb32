// tools/launcher_check/mesh_check.cc
// -----------------------------------------------------------------------------
// One rank of the launcher check: started by mpirun, srun or torchrun (never
// by itself), it reads the rendezvous from the environment, builds a 2 x 2
// mesh (or --mesh_shape's), all-reduces its rank id along each dim and checks the exact sum
// against the ranks of its group. It prints what it read (one "env" line),
// each dim's result and whether the dim stays inside one host, then one
// "result" line; tools/launcher_check.sh parses these lines:
//
//   mesh_check rank=1 env source=slurm world=4 local_rank=1 local_world=4
//       store=node1:29500 host=node1 SLURM_JOB_NODELIST=node1 ...
//   mesh_check rank=1 dim=tp group=0,1 sum=1 want=1 inside_host=yes
//       backend=shm
//   mesh_check rank=1 result=ok
//
// Flags:
//   --mesh_dim_names=dp,tp   names of the two dims (tp,dp names the host-major
//                            layout the other way round)
//   --mesh_shape=2x2         the two dims' sizes (4x1: dp is the whole job,
//                            two-level across hosts with 2 ranks each)
//   --require_inside_host=   dims InitDeviceMesh must keep inside one host
//   --backend=               MeshOptions.all.backend ("auto", "shm", "gloo");
//                            empty: the device's default ("auto" for "cpu":
//                            shm where a group's members share a segment)
//   --timeout_s=60           the mesh's timeout (rendezvous, groups, collectives)
//   --kill_rank=-1           this rank SIGKILLs itself once its groups are
//                            made (the others then fail in their first
//                            all-reduce, naming the peer's address)
// Exit status: 0 when every sum is right, 1 otherwise (the error is printed).
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/host_layout.h"
#include "device_mesh/init_device_mesh.h"

ABSL_FLAG(std::string, mesh_dim_names, "dp,tp", "names of the two mesh dims");
ABSL_FLAG(std::string, mesh_shape, "2x2",
          "sizes of the two mesh dims, AxB, with A x B the world size");
ABSL_FLAG(std::string, require_inside_host, "",
          "comma-separated dims that must stay inside one host");
ABSL_FLAG(std::string, backend, "",
          "MeshOptions.all.backend; empty: the default for \"cpu\"");
ABSL_FLAG(int, timeout_s, 60, "mesh timeout in seconds");
ABSL_FLAG(int, kill_rank, -1, "rank that SIGKILLs itself after group set-up");

namespace {

// Launcher variables worth showing: what the launcher told this rank.
constexpr const char* kShownEnv[] = {
    "MASTER_ADDR",         "MASTER_PORT",          "SLURM_JOB_NODELIST",
    "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "TORCHELASTIC_USE_AGENT_STORE",
    "GLOO_SOCKET_IFNAME"};

std::string Prefix(int rank) { return absl::StrCat("mesh_check rank=", rank); }

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

void PrintEnv(const devmesh::RendezvousInfo& info) {
  std::string line = absl::StrCat(
      Prefix(info.rank), " env source=", info.source,
      " world=", info.world_size, " local_rank=", info.local_rank,
      " local_world=", info.local_world_size, " store=", info.store_host, ":",
      info.store_port, " host=", HostName());
  for (const char* name : kShownEnv) {
    const char* value = std::getenv(name);
    if (value != nullptr) absl::StrAppend(&line, " ", name, "=", value);
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

absl::Status Run(const devmesh::RendezvousInfo& info) {
  std::vector<std::string> names =
      absl::StrSplit(absl::GetFlag(FLAGS_mesh_dim_names), ',');
  devmesh::MeshOptions options;
  options.all.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  options.all.backend = absl::GetFlag(FLAGS_backend);
  for (absl::string_view dim :
       absl::StrSplit(absl::GetFlag(FLAGS_require_inside_host), ',',
                      absl::SkipEmpty())) {
    options.require_inside_host.emplace_back(dim);
  }
  // A Bootstrap of our own (not InitDeviceMesh's process-wide one), so that
  // rank 0 keeps the store up until the others have left even when the
  // mesh fails: a rank that is still reading the start-up verdict then gets
  // the mesh's error, not a lost store connection.
  devmesh::BootstrapOptions boot_options;
  boot_options.timeout = *options.all.timeout;
  boot_options.shutdown_timeout = absl::Seconds(10);
  auto boot = devmesh::Bootstrap::Create(info, boot_options);
  if (!boot.ok()) return boot.status();
  std::shared_ptr<devmesh::Bootstrap> bootstrap = *std::move(boot);
  std::vector<int64_t> shape;
  for (absl::string_view size :
       absl::StrSplit(absl::GetFlag(FLAGS_mesh_shape), 'x')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(size, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mesh_shape=", absl::GetFlag(FLAGS_mesh_shape),
                       ": want AxB with positive sizes"));
    }
    shape.push_back(n);
  }
  auto mesh = devmesh::InitDeviceMesh(bootstrap, "cpu", shape, names, options);
  if (!mesh.ok()) return mesh.status();
  const int rank = mesh->GetRank();
  // Unknown hosts are reported ("inside_host=unknown"), not an error here:
  // tools/launcher_check.sh compares the column with what it expects.
  auto spans = devmesh::DimHostSpans(*mesh);
  if (!spans.ok()) {
    std::printf("%s hosts unknown: %s\n", Prefix(rank).c_str(),
                spans.status().ToString().c_str());
  }

  auto groups = mesh->GetAllGroups();
  if (!groups.ok()) return groups.status();
  if (rank == absl::GetFlag(FLAGS_kill_rank)) {
    std::printf("%s killing itself (SIGKILL)\n", Prefix(rank).c_str());
    std::fflush(stdout);
    raise(SIGKILL);
  }
  for (int d = 0; d < mesh->ndim(); ++d) {
    auto members = mesh->layout().GroupOf(rank, d);
    if (!members.ok()) return members.status();
    int64_t want = 0;
    for (int64_t r : *members) want += r;
    int64_t value = rank;
    if (absl::Status s = (*groups)[d]->AllReduce(
            &value, &value, 1, devmesh::DataType::kInt64,
            devmesh::ReduceOp::kSum);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("all-reduce along '",
                                                 names[d], "': ", s.message()));
    }
    std::string inside = "unknown";
    if (spans.ok()) {
      const devmesh::DimHostSpan& span = (*spans)[d];
      inside = span.inside_host
                   ? "yes"
                   : absl::StrCat("no (", span.ToString(), ")");
    }
    const std::string backend((*groups)[d]->backend());
    std::printf(
        "%s dim=%s group=%s sum=%lld want=%lld inside_host=%s backend=%s\n",
        Prefix(rank).c_str(), names[d].c_str(),
        absl::StrJoin(*members, ",").c_str(), static_cast<long long>(value),
        static_cast<long long>(want), inside.c_str(), backend.c_str());
    if (value != want) {
      return absl::InternalError(absl::StrCat("wrong sum along '", names[d],
                                              "': ", value, " != ", want));
    }
  }
  return (*groups)[0]->Barrier();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto info = devmesh::RendezvousInfoFromEnv();
  if (!info.ok()) {
    std::fprintf(stderr, "mesh_check: %s\n", info.status().ToString().c_str());
    return 1;
  }
  PrintEnv(*info);
  absl::Status s = Run(*info);
  if (!s.ok()) {
    std::printf("%s result=error %s\n", Prefix(info->rank).c_str(),
                s.ToString().c_str());
    return 1;
  }
  std::printf("%s result=ok\n", Prefix(info->rank).c_str());
  return 0;
}
