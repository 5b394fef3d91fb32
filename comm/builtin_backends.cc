// devmesh/comm/builtin_backends.cc
// Registers the backends every program that depends on @devmesh//comm has:
// "shm", "ucx" and "nccl" (comm/registry.h). Linked whole (alwayslink):
// nothing refers to this file's symbols.
#include "comm/nccl/nccl_communicator.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "comm/ucx/ucx_communicator.h"

namespace devmesh {
namespace {

// A static initializer: the names are registered before main.
const bool kRegistered = [] {
  bool ok = RegisterBackend("nccl", &CreateNcclCommunicator).ok();
  ok = RegisterBackend("shm", &CreateShmCommunicator).ok() && ok;
  ok = RegisterBackend("ucx", &CreateUcxCommunicator).ok() && ok;
  return ok;
}();

}  // namespace
}  // namespace devmesh
