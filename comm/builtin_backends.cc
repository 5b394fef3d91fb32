// devmesh/comm/builtin_backends.cc
// The backends every program that depends on @devmesh//comm has: "shm",
// "ucx" and "nccl" (comm/backend_registration.h). Linked whole
// (alwayslink): only the registry's weak reference names this file's hook.
#include <cstdlib>

#include "comm/backend_registration.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_options_codec.h"
#include "comm/shm/shm_communicator.h"
#include "comm/ucx/ucx_communicator.h"
#include "comm/ucx/ucx_worker.h"

namespace devmesh {
namespace comm_internal {

BackendList BuiltinBackends() {
  // NCCL: the "cuda" default; its communicators shrink in place
  // (ncclCommShrink, comm/nccl/nccl_communicator.h).
  BackendTraits nccl;
  nccl.default_for_device_types = {"cuda"};
  nccl.shrinks_in_place = true;
  // Shared memory compares every call across members as it runs it
  // (comm/shm/shm_communicator.h).
  BackendTraits shm;
  shm.checks_calls_in_band = true;
  // UCX checks its calls in band too, but a caller that asks for the
  // all-gather check gets it (GroupOptions::verify_calls): no traits.
  return {{"nccl", &CreateNcclCommunicator, nccl_internal::NcclOptionsCodec(),
           nccl},
          {"shm", &CreateShmCommunicator, {}, shm},
          {"ucx", &CreateUcxCommunicator, {}, {}}};
}

namespace {

// UCX's TCP settings that devmesh sets where the environment leaves them
// unset (comm/ucx/ucx_worker.h), written before main, while the process has
// one thread: setenv then races with no getenv of another thread (a worker
// made later would otherwise write them while the program's threads run).
const bool kUcxEnvironmentSet = [] {
  ucx_internal::SetUcxEnvironmentDefaults();
  return true;
}();

}  // namespace
}  // namespace comm_internal
}  // namespace devmesh
