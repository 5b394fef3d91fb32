// bazel run //bench:startup [-- --mesh_shape=4x2 --nproc=8]
// (//bench:startup_gloo: the same with backend "gloo" linked)
//
// Start-up of one rank: the time from the launch of the job to "every
// per-dim group usable" (InitDeviceMesh, GetGroup on every dim, then one
// all-reduce of one float on every dim's group), the side that
// tools/peer_bench.sh sets against PyTorch's init_process_group +
// init_device_mesh + one collective per dim (tools/peer_bench/torch_startup.py,
// which reports the same fields).
//
// Run under a launcher (torchrun / srun / mpirun variables, or the Python
// spawner of tools/peer_bench), each rank prints one line
//   PEER_BENCH_STARTUP {"rank":R,"t0_ns":..,"main_ns":..,"init_ns":..,
//                       "group_ns":[..],"allreduce_ns":[..],"ready_ns":..,
//                       "mesh_ns":..,
//                       "communicators":C,"store_round_trips":S,
//                       "init_round_trips":I,"store_bytes":B,"sockets":K,
//                       "maxrss_kb":M,"etcd_requests_init":EI,
//                       "etcd_requests":E,"cpu_us":{"main":..,"init":..,
//                       "group":[..],"allreduce":[..],"ready":..}}
// with wall-clock (CLOCK_REALTIME) nanoseconds: t0_ns is the launch time the
// spawner put in PEER_BENCH_T0_NS (this process's main() entry when unset),
// main_ns the entry of main(), init_ns the return of InitDeviceMesh (the
// rendezvous done), group_ns per dim the return of its GetGroup (the group
// created; its check all-reduce follows), allreduce_ns per dim the return of
// that all-reduce, ready_ns the end of the last all-reduce.
// "communicators" is what this rank created: its mesh groups
// (MeshRuntime::group_creations) plus any world communicator (only for a
// world-sized dim); "store_round_trips" and "store_bytes" the
// store calls made through the mesh's runtime after InitDeviceMesh and the
// payload bytes they moved (MeshRuntime::store_round_trips / store_bytes:
// the group rendezvous, not the bootstrap's own join), "init_round_trips"
// InitDeviceMesh's own (its mesh agreement: 3 on every rank); "sockets" the sockets this
// process holds when ready (listening and connected, the bootstrap's
// store connection included: /proc/self/fd); "maxrss_kb" its peak resident
// memory (getrusage), both taken when ready. Then (--hold_until_all_ready,
// the default) each rank all-reduces one float on every dim's group, so
// that ranks that finished early do not close connections and exit while
// others are still starting (at 1024 ranks on 2 cores that teardown cost
// the last ranks 2-3 s); then passes a Barrier on every dim's group, the
// first collective off the small all-reduce route, which connects the
// pairs a Gloo group left for first use (comm/gloo/gloo_communicator.h):
// mesh_ns is its end (-1 without the hold); then it all-reduces once more
// on every dim (every rank past its Barriers), and only then prints its line
// and tears down. With an etcd store (DEVMESH_STORE_ADDR=etcd://...),
// "etcd_requests_init" and "etcd_requests" are the HTTP requests this rank's
// EtcdStore sent up to init_ns (the bootstrap's join and InitDeviceMesh)
// and up to ready_ns (everything: the failure watch's too); -1 otherwise.
// "cpu_us" is this process's CPU time (user + system, every thread:
// getrusage) at the same points: at main() (exec, the dynamic loader and
// static initializers), at init_ns, at each group_ns and allreduce_ns, and
// at ready_ns; their sums over the ranks are the CPU each phase cost, apart
// from how busy the machine was.
// With no launcher variables it starts --nproc ranks itself with
// //bootstrap's launcher (as group_creation does).
//
// Exit codes: 0 success, 1 a runtime error (printed), 2 bad flags.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_flags.h"
#include "bootstrap/launcher.h"
#include "bootstrap/rendezvous.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "store/etcd_store.h"

ABSL_FLAG(std::string, mesh_shape, "4x2", "mesh shape: 8, 4x2, 2x4, 2x2x2");
ABSL_FLAG(std::string, backend, "auto",
          "every dim's backend: auto (InitDeviceMesh(\"cpu\")'s default: "
          "shared memory inside a host, UCX across hosts), gloo (only in "
          "//bench:startup_gloo, which links it), shm");
ABSL_FLAG(bool, hold_until_all_ready, true,
          "once ready, all-reduce one float on every dim's group (in dim "
          "order: every rank is ready), then time a Barrier per dim "
          "(mesh_ns), before printing and tearing the mesh down, as a "
          "job's ranks stay up after start-up; false: print and exit at "
          "once");
ABSL_FLAG(int, nproc, 0,
          "local ranks to launch when not under a launcher (0: the mesh's "
          "size)");

namespace devmesh {
namespace {

int64_t WallNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Sockets among this process's open file descriptors (fstat of each entry
// of /proc/self/fd: cheaper than readlink when 1024 ranks share 2 cores).
int64_t OpenSockets() {
  int64_t n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  const int self = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(e->d_name, &fd) || fd == self) continue;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) ++n;
  }
  closedir(dir);
  return n;
}

// This process's CPU time so far (user + system, all threads), microseconds.
int64_t CpuUs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return (int64_t{usage.ru_utime.tv_sec} + usage.ru_stime.tv_sec) * 1000000 +
         usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "startup: %s\n", s.ToString().c_str());
  return code;
}

// A one-float all-reduce on every dim's group, in dim order: it returns on
// a rank once every rank of the mesh has started it.
absl::Status AllReduceEveryDim(DeviceMesh& mesh) {
  for (int d = 0; d < mesh.ndim(); ++d) {
    auto group = mesh.GetGroup(d);
    if (!group.ok()) return group.status();
    float one = 1, sum = 0;
    if (absl::Status s = (*group)->AllReduce(&one, &sum, 1, DataType::kFloat32,
                                             ReduceOp::kSum);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The HTTP requests the mesh's etcd store has sent so far; -1 when the
// store is not an EtcdStore.
int64_t EtcdRequests(const DeviceMesh& mesh) {
  const auto* etcd =
      dynamic_cast<const EtcdStore*>(mesh.runtime()->base_store().get());
  return etcd != nullptr ? etcd->requests() : -1;
}

int RunRank(const std::vector<int64_t>& shape, int64_t main_ns,
            int64_t main_cpu_us) {
  int64_t t0_ns = main_ns;
  if (const char* t0 = std::getenv("PEER_BENCH_T0_NS");
      t0 != nullptr && !absl::SimpleAtoi(t0, &t0_ns)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    "PEER_BENCH_T0_NS='", t0, "' is not an integer")),
                2);
  }
  std::vector<std::string> names;
  for (size_t d = 0; d < shape.size(); ++d) names.push_back(absl::StrCat("d", d));
  MeshOptions options;
  options.all.backend = absl::GetFlag(FLAGS_backend);
  auto mesh = InitDeviceMesh("cpu", shape, names, options);
  if (!mesh.ok()) return Fail(mesh.status(), 1);
  const int64_t init_ns = WallNs();
  const int64_t init_cpu_us = CpuUs();
  // InitDeviceMesh's own store calls (its mesh agreement,
  // device_mesh/mesh_agreement.h), apart from the groups'.
  const int64_t init_trips = mesh->runtime()->store_round_trips();
  const int64_t init_bytes = mesh->runtime()->store_bytes();
  const int64_t etcd_init = EtcdRequests(*mesh);
  std::vector<int64_t> group_ns;      // per dim: GetGroup's return
  std::vector<int64_t> allreduce_ns;  // per dim: its all-reduce's return
  std::vector<int64_t> group_cpu_us, allreduce_cpu_us;  // CpuUs() there
  for (int d = 0; d < mesh->ndim(); ++d) {
    auto group = mesh->GetGroup(d);
    if (!group.ok()) return Fail(group.status(), 1);
    group_ns.push_back(WallNs());
    group_cpu_us.push_back(CpuUs());
    float one = 1, sum = 0;
    if (absl::Status s = (*group)->AllReduce(&one, &sum, 1, DataType::kFloat32,
                                             ReduceOp::kSum);
        !s.ok()) {
      return Fail(s, 1);
    }
    allreduce_ns.push_back(WallNs());
    allreduce_cpu_us.push_back(CpuUs());
    if (sum != static_cast<float>((*group)->size())) {
      return Fail(absl::InternalError(absl::StrCat(
                      "dim ", d, ": all-reduce of 1 gave ", sum, ", not ",
                      (*group)->size())),
                  1);
    }
  }
  const int64_t ready_ns = WallNs();
  const int64_t ready_cpu_us = CpuUs();
  const int64_t etcd_ready = EtcdRequests(*mesh);
  const auto& runtime = mesh->runtime();
  // Measured when ready, before the steps below connect anything more.
  const int64_t sockets = OpenSockets();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  int64_t mesh_ns = -1;
  if (absl::GetFlag(FLAGS_hold_until_all_ready)) {
    // A one-float all-reduce on each dim's group in dim order ends only
    // when every rank of the mesh has arrived (each dim's passes the
    // previous dims' arrivals along): no rank tears its groups down, and so
    // no closing connection or exiting process takes CPU from, a rank still
    // starting. An all-reduce rather than Barrier: like the check above it
    // stays on the route a Gloo group across hosts makes for small
    // all-reduces, where Barrier would connect the group's other pairs
    // (gloo_communicator.h).
    if (absl::Status s = AllReduceEveryDim(*mesh); !s.ok()) return Fail(s, 1);
    // Then, every rank ready, the first collective off that route: a
    // Barrier per dim, which connects every pair a Gloo group left for
    // first use. mesh_ns: its end. Then every rank waits for the others
    // again before it tears down.
    for (int d = 0; d < mesh->ndim(); ++d) {
      auto group = mesh->GetGroup(d);
      if (!group.ok()) return Fail(group.status(), 1);
      if (absl::Status s = (*group)->Barrier(); !s.ok()) return Fail(s, 1);
    }
    mesh_ns = WallNs();
    if (absl::Status s = AllReduceEveryDim(*mesh); !s.ok()) return Fail(s, 1);
  }
  std::printf(
      "PEER_BENCH_STARTUP {\"rank\":%d,\"t0_ns\":%lld,\"main_ns\":%lld,"
      "\"init_ns\":%lld,\"group_ns\":[%s],\"allreduce_ns\":[%s],"
      "\"ready_ns\":%lld,\"mesh_ns\":%lld,\"communicators\":%lld,"
      "\"store_round_trips\":%lld,\"init_round_trips\":%lld,"
      "\"store_bytes\":%lld,\"sockets\":%lld,\"maxrss_kb\":%lld,"
      "\"etcd_requests_init\":%lld,\"etcd_requests\":%lld,"
      "\"cpu_us\":{\"main\":%lld,\"init\":%lld,\"group\":[%s],"
      "\"allreduce\":[%s],\"ready\":%lld}}\n",
      mesh->GetRank(), static_cast<long long>(t0_ns),
      static_cast<long long>(main_ns), static_cast<long long>(init_ns),
      absl::StrJoin(group_ns, ",").c_str(),
      absl::StrJoin(allreduce_ns, ",").c_str(),
      static_cast<long long>(ready_ns), static_cast<long long>(mesh_ns),
      static_cast<long long>(runtime->group_creations() +
                             runtime->world_communicators()),
      static_cast<long long>(runtime->store_round_trips() - init_trips),
      static_cast<long long>(init_trips),
      static_cast<long long>(runtime->store_bytes() - init_bytes),
      static_cast<long long>(sockets),
      static_cast<long long>(usage.ru_maxrss),
      static_cast<long long>(etcd_init), static_cast<long long>(etcd_ready),
      static_cast<long long>(main_cpu_us), static_cast<long long>(init_cpu_us),
      absl::StrJoin(group_cpu_us, ",").c_str(),
      absl::StrJoin(allreduce_cpu_us, ",").c_str(),
      static_cast<long long>(ready_cpu_us));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  const int64_t main_ns = devmesh::WallNs();
  const int64_t main_cpu_us = devmesh::CpuUs();
  std::vector<std::string> original(argv, argv + argc);
  absl::ParseCommandLine(argc, argv);
  auto shape = devmesh::ParseMeshShape(absl::GetFlag(FLAGS_mesh_shape));
  if (!shape.ok()) return devmesh::Fail(shape.status(), 2);
  if (devmesh::HasRendezvousEnv()) return devmesh::RunRank(*shape, main_ns, main_cpu_us);
  int64_t size = 1;
  for (int64_t s : *shape) size = s > 4096 / size ? 4097 : size * s;
  devmesh::LaunchOptions launch;
  launch.nproc = absl::GetFlag(FLAGS_nproc) > 0 ? absl::GetFlag(FLAGS_nproc)
                                                : static_cast<int>(size);
  launch.argv = original;
  launch.argv[0] = "/proc/self/exe";
  launch.env.emplace_back("PEER_BENCH_T0_NS", absl::StrCat(main_ns));
  auto code = devmesh::LaunchLocal(launch);
  if (!code.ok()) return devmesh::Fail(code.status(), 1);
  return *code;
}
