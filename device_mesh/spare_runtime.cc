// devmesh/device_mesh/spare_runtime.cc
#include "device_mesh/spare_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/peer_info.h"
#include "device_mesh/peer_address.h"
#include "status/status_macros.h"
#include "store/etcd_store.h"
#include "store/tcp_store_client.h"

namespace devmesh {

bool StartedAsSpare() {
  const char* v = std::getenv(kSpareVar);
  return v != nullptr && std::string(v) == "1";
}

absl::StatusOr<std::shared_ptr<MeshRuntime>> SpareRuntimeFromEnv(
    absl::Duration connect_timeout) {
  DEVMESH_ASSIGN_OR_RETURN(RendezvousInfo info, RendezvousInfoFromEnv());
  std::shared_ptr<Store> store;
  if (info.use_agent_store) {
    BootstrapOptions options;
    options.timeout = connect_timeout;
    DEVMESH_ASSIGN_OR_RETURN(store, ConnectAgentStore(info, options));
  } else if (info.external_store && !info.etcd_endpoints.empty()) {
    // As the bootstrap connects it: retried until connect_timeout, so that
    // a spare may start before a member answers.
    EtcdStoreOptions etcd;
    etcd.endpoints = info.etcd_endpoints;
    etcd.key_prefix = info.etcd_prefix;
    etcd.connect_timeout = std::min(connect_timeout, absl::Seconds(5));
    const absl::Time deadline = absl::Now() + connect_timeout;
    for (;;) {
      absl::StatusOr<std::unique_ptr<EtcdStore>> connected =
          EtcdStore::Connect(etcd);
      if (connected.ok()) {
        store = std::shared_ptr<Store>(std::move(*connected));
        break;
      }
      if (!absl::IsUnavailable(connected.status()) ||
          absl::Now() >= deadline) {
        return connected.status();
      }
      absl::SleepFor(absl::Milliseconds(100));
      etcd.connect_timeout =
          std::max(absl::Milliseconds(1),
                   std::min(etcd.connect_timeout, deadline - absl::Now()));
    }
  } else if (info.external_store) {
    TcpStoreClientOptions client;
    client.host = info.store_host;
    client.port = info.store_port;
    if (const char* token = std::getenv("DEVMESH_STORE_TOKEN")) {
      client.token = token;
    }
    client.connect_timeout = connect_timeout;
    DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> connected,
                             TcpStoreClient::Connect(client));
    store = std::shared_ptr<Store>(std::move(connected));
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "global rank ", info.rank,
        " cannot join as a spare: the job's store is hosted by rank 0 (a "
        "spare needs a store no rank hosts: //bootstrap:launch --host_store, "
        "//store:server or an etcd cluster with DEVMESH_STORE_ADDR, or "
        "torchrun's agent store)"));
  }
  // The job's host table, as its rendezvous agreed it: every member chooses
  // a group's transport from it (MeshRuntime::CreateOn), so the spare holds
  // it too, but for its own entry: the host it runs on now. It answers a
  // Grow's call with that entry, and the Grow's decision carries it to
  // every member (DeviceMesh::Grow), which take the decision's table
  // before making the new groups.
  DEVMESH_ASSIGN_OR_RETURN(std::optional<std::vector<PeerInfo>> peers,
                           ReadPeerTable(*store));
  DEVMESH_ASSIGN_OR_RETURN(
      std::shared_ptr<MeshRuntime> runtime,
      MeshRuntime::Create(std::move(store), info.rank, info.world_size,
                          info.local_rank));
  if (peers.has_value() &&
      static_cast<int>(peers->size()) == info.world_size) {
    std::vector<std::string> hosts;
    for (const PeerInfo& peer : *peers) hosts.push_back(peer.hostname);
    // This process's own route toward the store, as the rendezvous finds
    // it for a rank, for the address its Gloo devices advertise.
    PeerInfo self = (*peers)[info.rank];
    self.hostname = LocalHostName();
    hosts[info.rank] = self.hostname;
    absl::StatusOr<std::string> route =
        LocalAddressToward(info.store_host, info.store_port);
    self.address = route.ok() ? *route : std::string();
    std::string address = PeerFacingAddress(self, *peers);
    runtime->SetHostInfo(std::move(hosts), std::move(address));
  }
  return runtime;
}

}  // namespace devmesh
