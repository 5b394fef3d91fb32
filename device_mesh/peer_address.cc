// devmesh/device_mesh/peer_address.cc
#include "device_mesh/peer_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

namespace devmesh {

bool IsLoopbackAddress(absl::string_view address) {
  const std::string text(address);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

std::string PeerFacingAddress(const PeerInfo& self,
                              const std::vector<PeerInfo>& peers,
                              const RouteProbe& route) {
  if (self.address.empty() || !IsLoopbackAddress(self.address)) {
    return self.address;
  }
  for (const PeerInfo& peer : peers) {
    if (peer.hostname == self.hostname || peer.address.empty() ||
        IsLoopbackAddress(peer.address)) {
      continue;
    }
    absl::StatusOr<std::string> local = route(peer.address);
    if (local.ok() && !local->empty() && !IsLoopbackAddress(*local)) {
      return *local;
    }
    break;  // one probe: the route to one remote host decides
  }
  return self.address;
}

std::string PeerFacingAddress(const PeerInfo& self,
                              const std::vector<PeerInfo>& peers) {
  // The port does not matter to a UDP connect (nothing is sent); 9 is the
  // discard port.
  return PeerFacingAddress(self, peers, [](absl::string_view host) {
    return LocalAddressToward(host, 9);
  });
}

}  // namespace devmesh
