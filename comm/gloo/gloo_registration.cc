// devmesh/comm/gloo/gloo_registration.cc
// Backend "gloo" (CreateGlooCommunicator) in a program that links
// @devmesh//comm:gloo: Gloo is opt-in (comm/registry.h,
// comm/backend_registration.h). Linked whole (alwayslink): only the
// registry's weak reference names this file's hook.
#include "comm/backend_registration.h"
#include "comm/gloo/gloo_communicator.h"

namespace devmesh {
namespace comm_internal {

BackendList GlooBackends() {
  return {{"gloo", &CreateGlooCommunicator, {}}};
}

}  // namespace comm_internal
}  // namespace devmesh
