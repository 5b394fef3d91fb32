#include "bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "status/status_macros.h"
#include "store/etcd_store.h"

namespace devmesh {
namespace {

// A listening socket handed over by //bootstrap:launch (which bound the free
// port it chose, so that nothing can take it before rank 0 listens): its fd
// from DEVMESH_STORE_LISTEN_FD when that names a socket bound to `port`,
// else -1. The variable is consumed either way.
int HandedListenFd(int port) {
  const char* env = std::getenv("DEVMESH_STORE_LISTEN_FD");
  if (env == nullptr) return -1;
  int fd = -1;
  const bool parsed = absl::SimpleAtoi(env, &fd);
  unsetenv("DEVMESH_STORE_LISTEN_FD");
  if (!parsed || fd < 0 || fcntl(fd, F_GETFD) < 0) return -1;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  int bound = -1;
  if (addr.ss_family == AF_INET) {
    bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  if (bound != port) return -1;
  fcntl(fd, F_SETFD, FD_CLOEXEC);  // not to be inherited any further
  return fd;
}

absl::StatusOr<std::shared_ptr<Store>> ConnectDevmeshStore(
    const RendezvousInfo& info, const BootstrapOptions& options,
    const std::string& token) {
  TcpStoreClientOptions client_options;
  client_options.host = info.store_host;
  client_options.port = info.store_port;
  client_options.token = token;
  client_options.connect_timeout = options.timeout;
  client_options.default_timeout = options.timeout;
  // The first handshake proves the peer is a devmesh store. Every rank of
  // the job connects at about the same time, and a store on a loaded host
  // answers them one by one: 1024 ranks on 8 namespace hosts of one 2-core
  // machine (load average 59) had 53 handshakes past the client's 5 s. So
  // 5 s plus 20 ms a rank (25.5 s at 1024), within the bootstrap timeout: a
  // small job still learns at once that MASTER_PORT is not a store's.
  client_options.handshake_timeout = std::min(
      options.timeout,
      client_options.handshake_timeout +
          absl::Milliseconds(20) * std::max(info.world_size, 0));
  DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> client,
                           TcpStoreClient::Connect(client_options));
  return std::shared_ptr<Store>(std::move(client));
}

// The etcd cluster of info.etcd_endpoints, keys under info.etcd_prefix.
// Retried until options.timeout, as a TCP store's connect is, so that ranks
// may start before etcd answers.
absl::StatusOr<std::shared_ptr<Store>> ConnectEtcdStore(
    const RendezvousInfo& info, const BootstrapOptions& options) {
  EtcdStoreOptions etcd;
  etcd.endpoints = info.etcd_endpoints;
  etcd.key_prefix = info.etcd_prefix;
  etcd.default_timeout = options.timeout;
  etcd.connect_timeout = std::min(options.timeout, absl::Seconds(5));
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.timeout;
  while (true) {
    absl::StatusOr<std::unique_ptr<EtcdStore>> store =
        EtcdStore::Connect(etcd);
    if (store.ok()) return std::shared_ptr<Store>(std::move(*store));
    if (!absl::IsUnavailable(store.status()) || absl::Now() >= deadline) {
      if (!absl::IsUnavailable(store.status())) return store.status();
      return absl::UnavailableError(absl::StrCat(
          "no member of the etcd store ", StoreAddressText(info),
          " answered within ",
          absl::FormatDuration(absl::Trunc(absl::Now() - start,
                                           absl::Milliseconds(1))),
          " (the bootstrap timeout is ",
          absl::FormatDuration(options.timeout), "); last try: ",
          store.status().message()));
    }
    etcd.connect_timeout =
        std::max(absl::Milliseconds(1),
                 std::min(etcd.connect_timeout, deadline - absl::Now()));
    absl::SleepFor(std::min(absl::Milliseconds(200),
                            std::max(absl::ZeroDuration(),
                                     deadline - absl::Now())));
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> ConnectAgentStore(
    const RendezvousInfo& info, const BootstrapOptions& options) {
  C10dStoreClientOptions c10d;
  c10d.host = info.store_host;
  c10d.port = info.store_port;
  c10d.connect_timeout = options.timeout;
  c10d.default_timeout = options.timeout;
  DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<C10dStoreClient> client,
                           C10dStoreClient::Connect(c10d));
  return std::make_shared<PrefixStore>(
      std::shared_ptr<Store>(std::move(client)), info.store_namespace);
}

absl::StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::FromEnv(
    const BootstrapOptions& options) {
  DEVMESH_ASSIGN_OR_RETURN(RendezvousInfo info, RendezvousInfoFromEnv());
  return Create(info, options);
}

absl::StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::Create(
    const RendezvousInfo& info, const BootstrapOptions& options) {
  if (info.world_size < 1 || info.rank < 0 || info.rank >= info.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", info.rank, " is outside [0, world_size=", info.world_size,
        ")"));
  }
  if (info.store_port < 1 || info.store_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store port ", info.store_port, " is outside 1..65535"));
  }
  if (info.store_host.empty()) {
    return absl::InvalidArgumentError("store host is empty");
  }
  std::string token;
  if (options.token) {
    token = *options.token;
  } else if (const char* env = std::getenv("DEVMESH_STORE_TOKEN")) {
    token = env;
  }
  std::unique_ptr<Bootstrap> boot(new Bootstrap(info, options));
  // With torchrun's agent store or an external store (DEVMESH_STORE_ADDR)
  // nobody binds: every rank joins it.
  if (info.rank == 0 && options.host_server && !info.use_agent_store &&
      !info.external_store) {
    TcpStoreServerOptions server_options;
    server_options.host = options.server_bind_host;
    server_options.port = info.store_port;
    server_options.token = token;
    const int handed = HandedListenFd(info.store_port);
    DEVMESH_ASSIGN_OR_RETURN(
        boot->server_, handed >= 0
                           ? TcpStoreServer::StartOnFd(handed, server_options)
                           : TcpStoreServer::Start(server_options));
  }
  DEVMESH_ASSIGN_OR_RETURN(
      std::shared_ptr<Store> store,
      !info.etcd_endpoints.empty() ? ConnectEtcdStore(info, options)
      : info.use_agent_store       ? ConnectAgentStore(info, options)
                                   : ConnectDevmeshStore(info, options, token));
  boot->store_ = std::move(store);
  // The start barrier is the peer info exchange: it also checks that every
  // rank agrees on the world size and the store, and tells each rank where
  // the others run.
  PeerInfo self;
  self.rank = info.rank;
  self.world_size = info.world_size;
  self.local_rank = info.local_rank;
  self.local_world_size = info.local_world_size;
  self.pid = getpid();
  self.hostname = LocalHostName();
  absl::StatusOr<std::string> address =
      LocalAddressToward(info.store_host, info.store_port);
  if (address.ok()) self.address = std::move(*address);
  self.store = StoreAddressText(info);
  absl::StatusOr<std::vector<PeerInfo>> peers =
      ExchangePeerInfo(*boot->store_, self, options.timeout);
  if (!peers.ok()) {
    if (boot->server_ != nullptr &&
        (absl::IsInvalidArgument(peers.status()) ||
         absl::IsDeadlineExceeded(peers.status()))) {
      WaitForVerdictReaders(*boot->store_, info.world_size,
                            std::min(options.timeout, absl::Seconds(10)));
    }
    return peers.status();
  }
  boot->peers_ = std::move(*peers);
  boot->joined_ = true;
  return boot;
}

namespace {
// Set when the rank left or was counted as left (CountAsLeft).
std::string GoneKey(int rank) {
  return absl::StrCat("devmesh/bootstrap/gone/", rank);
}
}  // namespace

absl::Status CountAsLeft(Store& store, int rank, int world_size) {
  if (rank <= 0 || rank >= world_size) return absl::OkStatus();
  return store.Set(GoneKey(rank), "1");
}

Bootstrap::~Bootstrap() { Leave(); }

void Bootstrap::Leave() {
  std::call_once(left_, [this] { LeaveOnce(); });
}

void Bootstrap::LeaveOnce() {
  if (!joined_ || store_ == nullptr || world_size() == 1) return;
  if (rank() != 0) {
    (void)CountAsLeft(*store_, rank(), world_size());
  } else if (server_ != nullptr) {
    // Every other rank's gone key, not the count: CountAsLeft claims the
    // gone key first, so a process that exits between its two store calls
    // (a failure watch's thread counting a dead rank) is still seen.
    std::vector<std::string> gone;
    gone.reserve(static_cast<size_t>(world_size() - 1));
    for (int r = 1; r < world_size(); ++r) gone.push_back(GoneKey(r));
    (void)store_->Wait(gone, shutdown_timeout_);
  }
}

absl::Status Bootstrap::Barrier(absl::string_view name) {
  int count = 0;
  {
    sync_internal::MutexLock lock(&mu_);
    count = barrier_counts_[name]++;
  }
  return devmesh::Barrier(*store_, absl::StrCat(name, "/", count), rank(),
                          world_size(), timeout_);
}

}  // namespace devmesh
