// devmesh/comm/gloo/gloo_device.h
// -----------------------------------------------------------------------------
// The Gloo TCP device (listening socket + event loop thread) of a process.
// One device per address choice is shared by every Gloo group of the
// process (world communicators, groups made from a mesh layout, Split
// children), so a group costs only its own connections, not a new loop
// thread: a rank in many groups still has one Gloo event-loop thread.
#ifndef DEVMESH_COMM_GLOO_GLOO_DEVICE_H_
#define DEVMESH_COMM_GLOO_GLOO_DEVICE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>

#include "absl/status/statusor.h"
#include "comm/gloo/gloo_loop_waker.h"
#include "comm/options.h"
#include "gloo/transport/device.h"

namespace devmesh {
namespace gloo_internal {

// Address choice: options.hostname when set; else the interface named by the
// GLOO_SOCKET_IFNAME environment variable; else
// options.store_route_address when set (the address this rank reaches the
// store through); else this host's name when a device can be made on it;
// else 127.0.0.1 (PyTorch's ProcessGroupGloo rule). When the last three
// choices give a loopback address (127.0.0.0/8: the store is reached over
// loopback, so every peer is on this host), the device is on this process's
// own loopback address instead, 127.<1 + pid / 65536>.<pid / 256 %
// 256>.<pid % 256> (devmesh's own): each Gloo pair listens on a socket of
// its own, and the kernel's search for its free port walks the ports in use
// on the same address, which at 256 ranks sharing 127.0.0.1 was over half
// of group creation's CPU time. Kept as given: `hostname` and
// GLOO_SOCKET_IFNAME; and 127.0.0.1 itself where this process cannot bind
// another loopback address. Side effect, once per process: SIGPIPE is ignored unless the
// program has its own handler, so that a peer dying mid-write is an error
// Status rather than a killed process. Shared: while a device made for the
// same (hostname, GLOO_SOCKET_IFNAME, store_route_address) in this process
// is alive, it is returned again (never across fork()). The device's event
// loop is made without Gloo's 10 ms idle tick (gloo_loop_waker.h): its loop
// thread starts with a timer slack of kIdleTickSlack and, when the caller
// runs under the default policy and DEVMESH_GLOO_LOOP_BATCH is not "0",
// under SCHED_BATCH (WithLoopThreadSettings says why), and the returned pointer
// also owns the loop's LoopWaker (LoopWakerFor), which the release of the last
// pointer kicks while it ends the device. Errors: Unavailable when no device
// can be made (message from Gloo). Thread-safe.
absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> MakeGlooDevice(
    const GlooOptions& options);

// The waker of a device MakeGlooDevice made (`device` as its pointer's get())
// while a pointer MakeGlooDevice returned for it is alive; nullptr otherwise
// (a ScopedLoopKick of it is then a no-op). Hold a ScopedLoopKick of it
// around every call that closes or destroys the device's pairs. Thread-safe.
std::shared_ptr<LoopWaker> LoopWakerFor(
    const ::gloo::transport::Device* device);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_DEVICE_H_
