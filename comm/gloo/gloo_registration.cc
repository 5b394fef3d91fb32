// devmesh/comm/gloo/gloo_registration.cc
// Backend "gloo" (CreateGlooCommunicator) in a program that links
// @devmesh//comm:gloo: Gloo is opt-in (comm/registry.h,
// comm/backend_registration.h). Linked whole (alwayslink): only the
// registry's weak reference names this file's hook.
#include <utility>

#include "comm/backend_registration.h"
#include "comm/gloo/gloo_communicator.h"

namespace devmesh {
namespace comm_internal {

BackendList GlooBackends() {
  // Every group a process makes carries the store route, whatever backend it
  // is named for: "auto" across hosts, and shared memory's point-to-point
  // pairs, may end on Gloo (GlooOptions::store_route_address).
  BackendOptionsCodec codec;
  codec.fill_process_fields = [](const LocalPlace& place,
                                 CommOptions* options) {
    options->gloo.store_route_address = place.store_route_address;
  };
  // Gloo compares no calls across members itself: its groups are verified
  // unless the caller says no (GroupOptions::verify_calls).
  BackendTraits traits;
  traits.verify_calls_by_default = true;
  return {{"gloo", &CreateGlooCommunicator, std::move(codec), traits}};
}

}  // namespace comm_internal
}  // namespace devmesh
