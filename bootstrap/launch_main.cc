// bazel run //bootstrap:launch -- --nproc=N [--master_port=P]
//     [--cpu_bind=none|core] [--host_store] [--keep_going]
//     [--spare_restarts=K] -- PROGRAM ARGS
// Starts N local ranks of PROGRAM with torchrun's variables; see launcher.h.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "bootstrap/launcher.h"

ABSL_FLAG(int, nproc, 1, "number of local ranks to start");
ABSL_FLAG(int, master_port, 0, "MASTER_PORT for the ranks; 0 = a free port");
ABSL_FLAG(std::string, cpu_bind, "none",
          "none (inherit affinity, as torchrun) or core (one CPU per rank, "
          "round-robin over this process's CPUs, as mpirun --bind-to core)");
ABSL_FLAG(absl::Duration, grace_period, absl::Seconds(5),
          "time between SIGTERM and SIGKILL when a rank fails");
ABSL_FLAG(bool, host_store, false,
          "the launcher hosts the store on MASTER_PORT (as torchrun's agent "
          "does) instead of rank 0, so that the store outlives every rank; "
          "ranks join it through DEVMESH_STORE_ADDR");
ABSL_FLAG(bool, keep_going, false,
          "a failing rank does not stop the others; exit with the first "
          "failure's code once all have exited");

ABSL_FLAG(int, spare_restarts, 0,
          "with --keep_going and --host_store: start a failed rank again, up "
          "to this many times, with DEVMESH_SPARE=1, to join the running job "
          "as a spare (DeviceMesh::JoinAsSpare)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "launch --nproc=N [--master_port=P] [--cpu_bind=none|core] "
      "[--host_store] [--keep_going] [--spare_restarts=K] -- PROGRAM "
      "[ARGS...]");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  devmesh::LaunchOptions options;
  options.nproc = absl::GetFlag(FLAGS_nproc);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.grace_period = absl::GetFlag(FLAGS_grace_period);
  options.host_store = absl::GetFlag(FLAGS_host_store);
  options.keep_going = absl::GetFlag(FLAGS_keep_going);
  options.spare_restarts = absl::GetFlag(FLAGS_spare_restarts);
  absl::StatusOr<devmesh::CpuBind> bind =
      devmesh::ParseCpuBind(absl::GetFlag(FLAGS_cpu_bind));
  if (!bind.ok()) {
    std::fprintf(stderr, "launch: --cpu_bind: %s\n",
                 std::string(bind.status().message()).c_str());
    return 2;
  }
  options.cpu_bind = *bind;
  options.argv.assign(rest.begin() + 1, rest.end());
  // Under `bazel run` the working directory is the runfiles tree: resolve a
  // relative program path against the directory the user ran bazel from.
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (cwd != nullptr && !options.argv.empty() &&
      options.argv[0].find('/') != std::string::npos &&
      options.argv[0][0] != '/') {
    options.argv[0] = std::string(cwd) + "/" + options.argv[0];
  }
  absl::StatusOr<int> code = devmesh::LaunchLocal(options);
  if (!code.ok()) {
    std::fprintf(stderr, "launch: %s\n", code.status().ToString().c_str());
    return 2;
  }
  return *code;
}
