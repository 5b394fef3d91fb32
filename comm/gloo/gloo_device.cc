// devmesh/comm/gloo/gloo_device.cc
#include "comm/gloo/gloo_device.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_status.h"
#include "gloo/transport/tcp/device.h"

namespace devmesh {
namespace gloo_internal {
namespace {

absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> TryCreate(
    const ::gloo::transport::tcp::attr& attr, absl::string_view what) {
  std::shared_ptr<::gloo::transport::Device> device;
  absl::Status status = GlooCall(what, [&] {
    device = ::gloo::transport::tcp::CreateDevice(attr);
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
    attr.hostname = options.store_route_address;
    return TryCreate(attr, absl::StrCat("gloo device on ",
                                        options.store_route_address,
                                        " (this rank's address toward the "
                                        "store; set GLOO_SOCKET_IFNAME to "
                                        "choose another interface)"));
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
    attr.hostname = host;
    auto device = TryCreate(attr, "gloo device");
    if (device.ok()) return device;
  }
  attr.hostname = "127.0.0.1";
  return TryCreate(attr, "gloo device on 127.0.0.1");
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
  static std::mutex* mu = new std::mutex;
  static auto* devices =
      new std::map<Key, std::weak_ptr<::gloo::transport::Device>>;
  std::lock_guard<std::mutex> lock(*mu);
  for (auto it = devices->begin(); it != devices->end();) {
    it = it->second.expired() ? devices->erase(it) : std::next(it);
  }
  auto it = devices->find(key);
  if (it != devices->end()) {
    if (auto device = it->second.lock()) return device;
  }
  auto device = CreateDevice(options);
  if (!device.ok()) return device.status();
  (*devices)[key] = *device;
  return device;
}

}  // namespace gloo_internal
}  // namespace devmesh
