// devmesh/comm/gloo/gloo_registration.cc
// Registers backend "gloo" (CreateGlooCommunicator) when a program links
// @devmesh//comm:gloo: Gloo is opt-in (comm/registry.h). Linked whole
// (alwayslink): nothing refers to this file's symbols.
#include "comm/gloo/gloo_communicator.h"
#include "comm/registry.h"

namespace devmesh {
namespace {

// A static initializer: "gloo" is registered before main.
const bool kRegistered =
    RegisterBackend("gloo", &CreateGlooCommunicator).ok();

}  // namespace
}  // namespace devmesh
