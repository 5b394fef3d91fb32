// devmesh/device_mesh/peer_address.h
// -----------------------------------------------------------------------------
// The address this rank's Gloo devices advertise to their peers by default
// (when neither GLOO_SOCKET_IFNAME nor GlooOptions::hostname is set): the
// address through which this rank reaches the store (PeerInfo::address), as
// NCCL picks the interface that reaches its peers, rather than what the host
// name resolves to (often loopback: Debian's "127.0.1.1 host" line).
//
// One case needs more: a rank on the store's own host may reach the store
// over loopback (MASTER_ADDR or the Slurm node name resolves to 127.x there)
// while ranks on other hosts cannot reach loopback. Then, when any peer runs
// on another host, the address is the local end of the route toward that
// peer's address (the first such peer in rank order), which is the interface
// the other hosts reach this one through. A job on one host keeps loopback.
//
// Thread-safety: pure, apart from `route` (LocalAddressToward by default,
// which opens and closes one UDP socket and sends nothing).
#ifndef DEVMESH_DEVICE_MESH_PEER_ADDRESS_H_
#define DEVMESH_DEVICE_MESH_PEER_ADDRESS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bootstrap/peer_info.h"

namespace devmesh {

// The local address of a route toward `host` (an IP literal).
using RouteProbe =
    std::function<absl::StatusOr<std::string>(absl::string_view host)>;

// True for 127.0.0.0/8 and ::1 (IP literals; false for anything else).
bool IsLoopbackAddress(absl::string_view address);

// The address to advertise, by the rule above; "" when self.address is
// empty (then Gloo's own rule applies: the host name, else 127.0.0.1). A
// failed `route` probe keeps self.address. Never an error.
std::string PeerFacingAddress(const PeerInfo& self,
                              const std::vector<PeerInfo>& peers,
                              const RouteProbe& route);
std::string PeerFacingAddress(const PeerInfo& self,
                              const std::vector<PeerInfo>& peers);

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_PEER_ADDRESS_H_
