// devmesh/comm/gloo/gloo_device.cc
#include "comm/gloo/gloo_device.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_loop_waker.h"
#include "comm/gloo/gloo_status.h"
#include "gloo/transport/tcp/device.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"
#include "store/socket.h"

namespace devmesh {
namespace gloo_internal {
namespace {

absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> TryCreate(
    const ::gloo::transport::tcp::attr& attr, absl::string_view what) {
  std::shared_ptr<::gloo::transport::Device> device;
  absl::Status status = GlooCall(what, [&] {
    WithLoopThreadSettings(
        [&] { device = ::gloo::transport::tcp::CreateDevice(attr); });
  });
  if (!status.ok()) return absl::UnavailableError(status.message());
  return device;
}

// Gloo's TCP pairs write without MSG_NOSIGNAL: a peer that dies mid-write
// would raise SIGPIPE and kill this process, where the contract is an error
// Status. So, once, ignore SIGPIPE unless the program installed a handler of
// its own (as gRPC and Python do); EPIPE then reaches Gloo as an error.
void IgnoreSigpipeUnlessHandled() {
  static const bool done = [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
        current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)done;
}

// Whether `host` (a name or an IP literal) is, by its first address as Gloo
// resolves it, an IPv4 loopback address (127.0.0.0/8).
bool IsLoopbackHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback = false;
  if (found != nullptr && found->ai_addr != nullptr &&
      found->ai_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
    loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  freeaddrinfo(found);
  return loopback;
}

// A loopback address of this process's own, 127.<1 + pid / 65536>.<pid /
// 256 % 256>.<pid % 256> (PIDs are below 2^22, so the first byte after 127
// is 1 to 64: never 127.0.0.1 nor Debian's 127.0.1.1), when this process
// can listen on it; "" otherwise (a loopback of one address only, as in some
// sandboxes).
std::string PerProcessLoopback() {
  const uint32_t pid = static_cast<uint32_t>(getpid()) & 0x3fffff;
  const std::string address =
      absl::StrCat("127.", 1 + (pid >> 16), ".", (pid >> 8) & 0xff, ".",
                   pid & 0xff);
  return Socket::Listen(address, 0).ok() ? address : "";
}

// A device on `host`, or, when `host` is a loopback address, on this
// process's own loopback address (PerProcessLoopback). Every Gloo pair
// listens on a socket of its own, bound to port 0 of the device's address
// with SO_REUSEADDR, and Linux's search for a free port (in the lower half of
// ip_local_port_range first) then walks the ports already in use on that
// address: with 256 ranks on one host sharing 127.0.0.1 that
// search was over half of all CPU time of group creation (perf: in
// inet_bhash2_conflict, inet_bind2_bucket_find and their locks), growing
// with the number of ranks. On an address of its own each process searches
// only among its own sockets. Peers can reach it: a loopback address is
// reached only from this host anyway, and all of 127.0.0.0/8 is local.
absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> CreateOn(
    ::gloo::transport::tcp::attr attr, const std::string& host,
    const std::string& what) {
  if (IsLoopbackHost(host)) {
    // Per call, not cached: a child of fork() has a PID of its own.
    const std::string own = PerProcessLoopback();
    if (!own.empty()) {
      attr.hostname = own;
      auto device = TryCreate(
          attr, absl::StrCat(what, ", on this process's loopback address ",
                             own));
      if (device.ok()) return device;
    }
  }
  attr.hostname = host;
  return TryCreate(attr, what);
}

}  // namespace

static absl::StatusOr<std::shared_ptr<::gloo::transport::Device>>
CreateDevice(const GlooOptions& options) {
  ::gloo::transport::tcp::attr attr;
  if (!options.hostname.empty()) {
    attr.hostname = options.hostname;
    return TryCreate(attr, absl::StrCat("gloo device on host \"",
                                        options.hostname, "\""));
  }
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  if (iface != nullptr && iface[0] != '\0') {
    attr.iface = iface;
    return TryCreate(attr, absl::StrCat("gloo device on GLOO_SOCKET_IFNAME=\"",
                                        iface, "\""));
  }
  if (!options.store_route_address.empty()) {
    return CreateOn(attr, options.store_route_address,
                    absl::StrCat("gloo device on ",
                                 options.store_route_address,
                                 " (this rank's address toward the store; "
                                 "set GLOO_SOCKET_IFNAME to choose another "
                                 "interface)"));
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
    auto device = CreateOn(attr, host, "gloo device");
    if (device.ok()) return device;
  }
  return CreateOn(attr, "127.0.0.1", "gloo device on 127.0.0.1");
}

namespace {

// The wakers of the devices MakeGlooDevice handed out and that are still
// held, by device.
struct WakerTable {
  sync_internal::Mutex mu;
  std::map<const ::gloo::transport::Device*, std::weak_ptr<LoopWaker>> wakers
      ABSL_GUARDED_BY(mu);
};
WakerTable& Wakers() {
  static auto* table = new WakerTable;
  return *table;
}

// What MakeGlooDevice's pointer owns: the device and its loop's waker. Its
// release ends the device (when no pair holds it any more) with the loop
// kicked, so that the loop thread sees its done_ flag at once instead of at
// the slowed tick (gloo_loop_waker.h).
struct HeldDevice {
  std::shared_ptr<::gloo::transport::Device> device;
  std::shared_ptr<LoopWaker> waker;
  ~HeldDevice() {
    {
      WakerTable& table = Wakers();
      sync_internal::MutexLock lock(&table.mu);
      table.wakers.erase(device.get());
    }
    ScopedLoopKick kick(waker);
    device.reset();
  }
};

}  // namespace

std::shared_ptr<LoopWaker> LoopWakerFor(
    const ::gloo::transport::Device* device) {
  WakerTable& table = Wakers();
  sync_internal::MutexLock lock(&table.mu);
  auto it = table.wakers.find(device);
  return it == table.wakers.end() ? nullptr : it->second.lock();
}

absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> MakeGlooDevice(
    const GlooOptions& options) {
  IgnoreSigpipeUnlessHandled();
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  // The process id is part of the key: a child of fork() has no event-loop
  // thread, so it must never reuse a device its parent made.
  using Key = std::tuple<pid_t, std::string, std::string, std::string>;
  const Key key{getpid(), options.hostname, iface == nullptr ? "" : iface,
                options.store_route_address};
  struct DeviceTable {
    sync_internal::Mutex mu;
    std::map<Key, std::weak_ptr<::gloo::transport::Device>> devices
        ABSL_GUARDED_BY(mu);
  };
  static auto* table = new DeviceTable;
  sync_internal::MutexLock lock(&table->mu);
  for (auto it = table->devices.begin(); it != table->devices.end();) {
    it = it->second.expired() ? table->devices.erase(it) : std::next(it);
  }
  auto it = table->devices.find(key);
  if (it != table->devices.end()) {
    if (auto device = it->second.lock()) return device;
  }
  DEVMESH_ASSIGN_OR_RETURN(std::shared_ptr<::gloo::transport::Device> created,
                           CreateDevice(options));
  auto held = std::make_shared<HeldDevice>();
  held->device = std::move(created);
  held->waker = LoopWaker::Attach(*held->device);
  {
    WakerTable& wakers = Wakers();
    sync_internal::MutexLock wakers_lock(&wakers.mu);
    wakers.wakers[held->device.get()] = held->waker;
  }
  // Shares `held`'s ownership, points at the device.
  std::shared_ptr<::gloo::transport::Device> device(held, held->device.get());
  table->devices[key] = device;
  return device;
}

}  // namespace gloo_internal
}  // namespace devmesh
