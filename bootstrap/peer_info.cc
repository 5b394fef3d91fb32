// PeerInfo's byte form, the peer table's, and the local host facts a rank
// publishes (host name, address toward the store). The exchange itself is in
// peer_exchange.cc.
#include "bootstrap/peer_info.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

// Fields are "<decimal length>:<bytes>", back to back.
void PutField(std::string& out, absl::string_view field) {
  absl::StrAppend(&out, field.size(), ":", field);
}
void PutInt(std::string& out, int64_t v) { PutField(out, absl::StrCat(v)); }

class FieldReader {
 public:
  explicit FieldReader(absl::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  absl::StatusOr<std::string> Next() {
    const size_t colon = rest_.find(':');
    uint64_t len = 0;
    if (colon == absl::string_view::npos || colon == 0 || colon > 20 ||
        !absl::SimpleAtoi(rest_.substr(0, colon), &len) ||
        len > rest_.size() - colon - 1) {
      return absl::InvalidArgumentError("peer info bytes are malformed");
    }
    std::string field(rest_.substr(colon + 1, len));
    rest_.remove_prefix(colon + 1 + len);
    return field;
  }
  absl::StatusOr<int64_t> NextInt() {
    DEVMESH_ASSIGN_OR_RETURN(std::string f, Next());
    int64_t v = 0;
    if (!absl::SimpleAtoi(f, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer info field '", f, "' is not an integer"));
    }
    return v;
  }

 private:
  absl::string_view rest_;
};

absl::Status ReadInt(FieldReader& r, int& out) {
  DEVMESH_ASSIGN_OR_RETURN(int64_t v, r.NextInt());
  if (v < INT32_MIN || v > INT32_MAX) {
    return absl::InvalidArgumentError("peer info integer out of range");
  }
  out = static_cast<int>(v);
  return absl::OkStatus();
}

}  // namespace

std::string EncodePeerInfo(const PeerInfo& info) {
  std::string out;
  PutInt(out, info.rank);
  PutInt(out, info.world_size);
  PutInt(out, info.local_rank);
  PutInt(out, info.local_world_size);
  PutInt(out, info.pid);
  PutField(out, info.hostname);
  PutField(out, info.address);
  PutField(out, info.store);
  return out;
}

absl::StatusOr<PeerInfo> DecodePeerInfo(absl::string_view bytes) {
  FieldReader r(bytes);
  PeerInfo info;
  for (int* field : {&info.rank, &info.world_size, &info.local_rank,
                     &info.local_world_size}) {
    DEVMESH_RETURN_IF_ERROR(ReadInt(r, *field));
  }
  DEVMESH_ASSIGN_OR_RETURN(info.pid, r.NextInt());
  for (std::string* field : {&info.hostname, &info.address, &info.store}) {
    DEVMESH_ASSIGN_OR_RETURN(*field, r.Next());
  }
  if (!r.done()) {
    return absl::InvalidArgumentError("peer info bytes have trailing data");
  }
  return info;
}

// Table: the count, the distinct strings, then per rank its five integers
// and the indexes of its three strings.
std::string EncodePeerTable(const std::vector<PeerInfo>& peers) {
  std::vector<std::string> strings;
  absl::flat_hash_map<std::string, int64_t> index;
  auto intern = [&](const std::string& s) {
    auto [it, inserted] = index.try_emplace(s, strings.size());
    if (inserted) strings.push_back(s);
    return it->second;
  };
  std::string body;
  for (const PeerInfo& p : peers) {
    for (int64_t v : {int64_t{p.rank}, int64_t{p.world_size},
                      int64_t{p.local_rank}, int64_t{p.local_world_size},
                      p.pid, intern(p.hostname), intern(p.address),
                      intern(p.store)}) {
      PutInt(body, v);
    }
  }
  std::string out;
  PutInt(out, static_cast<int64_t>(peers.size()));
  PutInt(out, static_cast<int64_t>(strings.size()));
  for (const std::string& s : strings) PutField(out, s);
  out += body;
  return out;
}

absl::StatusOr<std::vector<PeerInfo>> DecodePeerTable(absl::string_view bytes) {
  FieldReader r(bytes);
  DEVMESH_ASSIGN_OR_RETURN(int64_t n, r.NextInt());
  DEVMESH_ASSIGN_OR_RETURN(int64_t n_strings, r.NextInt());
  // Every entry takes at least 2 bytes ("0:"), so larger counts are corrupt.
  if (n < 0 || n_strings < 0 || n > static_cast<int64_t>(bytes.size()) ||
      n_strings > static_cast<int64_t>(bytes.size())) {
    return absl::InvalidArgumentError("peer table counts are malformed");
  }
  std::vector<std::string> strings;
  for (int64_t i = 0; i < n_strings; ++i) {
    DEVMESH_ASSIGN_OR_RETURN(std::string s, r.Next());
    strings.push_back(std::move(s));
  }
  auto string_at = [&](int64_t i) -> absl::StatusOr<std::string> {
    if (i < 0 || i >= static_cast<int64_t>(strings.size())) {
      return absl::InvalidArgumentError("peer table string index out of range");
    }
    return strings[i];
  };
  std::vector<PeerInfo> peers;
  for (int64_t i = 0; i < n; ++i) {
    PeerInfo p;
    for (int* field : {&p.rank, &p.world_size, &p.local_rank,
                       &p.local_world_size}) {
      DEVMESH_RETURN_IF_ERROR(ReadInt(r, *field));
    }
    DEVMESH_ASSIGN_OR_RETURN(p.pid, r.NextInt());
    for (std::string* field : {&p.hostname, &p.address, &p.store}) {
      DEVMESH_ASSIGN_OR_RETURN(int64_t idx, r.NextInt());
      DEVMESH_ASSIGN_OR_RETURN(*field, string_at(idx));
    }
    peers.push_back(std::move(p));
  }
  if (!r.done()) {
    return absl::InvalidArgumentError("peer table bytes have trailing data");
  }
  return peers;
}

std::string LocalHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "unknown-host";
  }
  return name;
}

absl::StatusOr<std::string> LocalAddressToward(absl::string_view host,
                                               int port) {
  std::string name(host);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (int rc = getaddrinfo(name.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store host '", host, "' does not resolve: ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    const bool ok =
        connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    if (!ok) last_error = std::strerror(errno);
    close(fd);
    if (!ok) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        local.ss_family == AF_INET6
            ? static_cast<const void*>(
                  &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (inet_ntop(local.ss_family, raw, text, sizeof(text)) == nullptr) {
      last_error = std::strerror(errno);
      continue;
    }
    freeaddrinfo(found);
    return std::string(text);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(absl::StrCat(
      "no route from this host to the store at ", host, ":", port, ": ",
      last_error));
}

}  // namespace devmesh
