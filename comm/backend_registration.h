// devmesh/comm/backend_registration.h
// -----------------------------------------------------------------------------
// How devmesh's own backends reach the registry (comm/registry.h) whatever
// the order of static initialization. Each backend target defines its hook
// (//comm: BuiltinBackends in builtin_backends.cc; //comm:gloo:
// GlooBackends in gloo/gloo_registration.cc, linked whole); the registry
// declares them weak, so that it links without them, and adds the ones
// linked into the program when it is first used. So a lookup from any
// static initializer, or from main, finds every linked backend (a
// registration by a static initializer of the backend's own could run after
// a caller's initializer in another file).
//
// Each entry carries the backend's option codec and traits
// (comm/backend_options.h) beside its factory.
//
// Internal to //comm. Thread-safety: the hooks are pure functions.
#ifndef DEVMESH_COMM_BACKEND_REGISTRATION_H_
#define DEVMESH_COMM_BACKEND_REGISTRATION_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <string>
#include <vector>

#include "comm/backend_options.h"

namespace devmesh {
namespace comm_internal {

// One backend as its target registers it.
struct BackendRegistration {
  std::string name;
  CommunicatorFactory factory;
  BackendOptionsCodec options;  // empty: no typed options
  BackendTraits traits;         // default: none of the traits
};
using BackendList = std::vector<BackendRegistration>;

// "shm", "ucx" and "nccl": defined in //comm.
BackendList BuiltinBackends() __attribute__((weak));
// "gloo": defined in //comm:gloo.
BackendList GlooBackends() __attribute__((weak));

}  // namespace comm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_BACKEND_REGISTRATION_H_
