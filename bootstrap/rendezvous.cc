#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

absl::Status Bad(absl::string_view var, absl::string_view value,
                 absl::string_view why) {
  // No variable: an address given from code (UseStoreAddress).
  if (var.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("store address '", value, "' ", why));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("environment variable ", var, "='", value, "' ", why));
}

// Reads an integer variable; `fallback` is used when it is unset (nullopt:
// required).
absl::StatusOr<int> Int(const EnvLookup& env, absl::string_view var,
                        std::optional<int> fallback, int min, int max) {
  std::optional<std::string> v = env(var);
  if (!v) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", var, " is not set"));
  }
  int n = 0;
  if (!absl::SimpleAtoi(*v, &n)) return Bad(var, *v, "is not an integer");
  if (n < min || n > max) {
    return Bad(var, *v, absl::StrCat("is outside [", min, ", ", max, "]"));
  }
  return n;
}

absl::StatusOr<std::string> Str(const EnvLookup& env, absl::string_view var) {
  std::optional<std::string> v = env(var);
  if (!v || v->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", var, " is not set"));
  }
  return *v;
}

constexpr int kMaxInt = 1 << 30;

// Checks rank < world, local_rank < local_world <= world.
absl::Status CheckConsistent(const RendezvousInfo& info,
                             absl::string_view rank_var,
                             absl::string_view world_var,
                             absl::string_view local_rank_var,
                             absl::string_view local_world_var) {
  if (info.rank >= info.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        rank_var, "=", info.rank, " is not below ", world_var, "=",
        info.world_size));
  }
  if (info.local_rank >= info.local_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        local_rank_var, "=", info.local_rank, " is not below ",
        local_world_var, "=", info.local_world_size));
  }
  if (info.local_world_size > info.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        local_world_var, "=", info.local_world_size, " is above ", world_var,
        "=", info.world_size));
  }
  return absl::OkStatus();
}

// MASTER_ADDR, parsed by ParseStoreHost.
absl::StatusOr<std::string> StoreHost(const EnvLookup& env) {
  DEVMESH_ASSIGN_OR_RETURN(std::string raw, Str(env, "MASTER_ADDR"));
  return ParseStoreHost("MASTER_ADDR", raw);
}

// "host:port" (IPv6 in brackets) of a store address in `value` of `var`:
// `text` is the whole of it (a TCP store) or one etcd endpoint.
absl::Status ParseHostPort(absl::string_view var, absl::string_view value,
                           absl::string_view text, std::string* host_out,
                           int* port_out) {
  const size_t colon = text.rfind(':');
  if (text.empty() || colon == absl::string_view::npos ||
      colon + 1 == text.size()) {
    return Bad(var, value,
               "is not host:port (an IPv6 host in brackets: [::1]:29500)");
  }
  absl::string_view host = text.substr(0, colon);
  if (host.empty()) return Bad(var, value, "names no host");
  if (host.find(':') != absl::string_view::npos &&
      (host.front() != '[' || host.back() != ']')) {
    return Bad(var, value,
               "has an IPv6 host without brackets (write [::1]:29500)");
  }
  int port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return Bad(var, value, "does not end with a port in 1..65535");
  }
  DEVMESH_ASSIGN_OR_RETURN(*host_out, ParseStoreHost(var, host));
  *port_out = port;
  return absl::OkStatus();
}

constexpr absl::string_view kEtcdScheme = "etcd://";

// DEVMESH_STORE_ADDR: a store outside the ranks. Sets the store address and
// external_store; false when unset.
absl::StatusOr<bool> ReadExternalStore(const EnvLookup& env,
                                       RendezvousInfo& info) {
  std::optional<std::string> value = env(kExternalStoreVar);
  if (!value) return false;
  DEVMESH_ASSIGN_OR_RETURN(StoreAddress address,
                           ParseStoreAddress(kExternalStoreVar, *value));
  info.store_host = std::move(address.host);
  info.store_port = address.port;
  info.etcd_endpoints = std::move(address.etcd_endpoints);
  info.etcd_prefix = std::move(address.etcd_prefix);
  info.external_store = true;
  return true;
}

// torchrun's agent store: TORCHELASTIC_USE_AGENT_STORE == "True".
absl::Status ReadAgentStore(const EnvLookup& env, RendezvousInfo& info) {
  std::optional<std::string> flag = env("TORCHELASTIC_USE_AGENT_STORE");
  if (!flag || *flag != "True") return absl::OkStatus();
  info.use_agent_store = true;
  DEVMESH_ASSIGN_OR_RETURN(
      const int attempt, Int(env, "TORCHELASTIC_RESTART_COUNT", 0, 0, kMaxInt));
  std::optional<std::string> run_id = env("TORCHELASTIC_RUN_ID");
  info.store_namespace =
      absl::StrCat("devmesh/", run_id && !run_id->empty() ? *run_id : "none",
                   "/attempt_", attempt);
  return absl::OkStatus();
}

absl::StatusOr<RendezvousInfo> FromTorchrun(const EnvLookup& env) {
  RendezvousInfo info;
  info.source = "torchrun";
  DEVMESH_ASSIGN_OR_RETURN(info.world_size,
                           Int(env, "WORLD_SIZE", {}, 1, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(info.rank, Int(env, "RANK", {}, 0, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(info.local_rank,
                           Int(env, "LOCAL_RANK", info.rank, 0, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(
      info.local_world_size,
      Int(env, "LOCAL_WORLD_SIZE", info.world_size, 1, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(const bool external, ReadExternalStore(env, info));
  if (!external) {
    DEVMESH_ASSIGN_OR_RETURN(info.store_host, StoreHost(env));
    DEVMESH_ASSIGN_OR_RETURN(info.store_port,
                             Int(env, "MASTER_PORT", {}, 1, 65535));
    DEVMESH_RETURN_IF_ERROR(ReadAgentStore(env, info));
  }
  DEVMESH_RETURN_IF_ERROR(CheckConsistent(info, "RANK", "WORLD_SIZE",
                                          "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
  return info;
}

absl::StatusOr<RendezvousInfo> FromOpenMpi(const EnvLookup& env) {
  RendezvousInfo info;
  info.source = "openmpi";
  DEVMESH_ASSIGN_OR_RETURN(info.rank,
                           Int(env, "OMPI_COMM_WORLD_RANK", {}, 0, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(info.world_size,
                           Int(env, "OMPI_COMM_WORLD_SIZE", {}, 1, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(
      info.local_rank, Int(env, "OMPI_COMM_WORLD_LOCAL_RANK", {}, 0, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(
      info.local_world_size,
      Int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", {}, 1, kMaxInt));
  DEVMESH_ASSIGN_OR_RETURN(const bool external, ReadExternalStore(env, info));
  if (!external) {
    DEVMESH_ASSIGN_OR_RETURN(info.store_host, StoreHost(env));
    DEVMESH_ASSIGN_OR_RETURN(
        info.store_port, Int(env, "MASTER_PORT", kDefaultStorePort, 1, 65535));
  }
  DEVMESH_RETURN_IF_ERROR(CheckConsistent(
      info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"));
  return info;
}

// SLURM_TASKS_PER_NODE "2(x3),1": the count for node `node`; `*total` gets
// the sum over every node (8 here).
absl::StatusOr<int> TasksOnNode(absl::string_view value, int node,
                                int64_t* total) {
  int index = 0;
  std::optional<int> found;
  *total = 0;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int count = 0, repeat = 1;
    absl::string_view count_text = part;
    size_t paren = part.find('(');
    if (paren != absl::string_view::npos) {
      count_text = part.substr(0, paren);
      absl::string_view rep = part.substr(paren);
      if (!absl::ConsumePrefix(&rep, "(x") || !absl::ConsumeSuffix(&rep, ")") ||
          !absl::SimpleAtoi(rep, &repeat) || repeat < 1) {
        return Bad("SLURM_TASKS_PER_NODE", value, "is not in the 2(x3),1 form");
      }
    }
    if (!absl::SimpleAtoi(count_text, &count) || count < 1) {
      return Bad("SLURM_TASKS_PER_NODE", value, "is not in the 2(x3),1 form");
    }
    if (!found && node < index + repeat) found = count;
    index += repeat;
    *total += int64_t{count} * repeat;
    if (*total > kMaxInt) {
      return Bad("SLURM_TASKS_PER_NODE", value, "adds up to too many tasks");
    }
  }
  if (!found) {
    return Bad("SLURM_TASKS_PER_NODE", value,
               absl::StrCat("has no entry for SLURM_NODEID=", node));
  }
  return *found;
}

absl::StatusOr<RendezvousInfo> FromSlurm(const EnvLookup& env) {
  RendezvousInfo info;
  info.source = "slurm";
  DEVMESH_ASSIGN_OR_RETURN(info.rank, Int(env, "SLURM_PROCID", {}, 0, kMaxInt));
  if (env("SLURM_NTASKS")) {
    DEVMESH_ASSIGN_OR_RETURN(info.world_size,
                             Int(env, "SLURM_NTASKS", {}, 1, kMaxInt));
  } else {
    DEVMESH_ASSIGN_OR_RETURN(info.world_size,
                             Int(env, "SLURM_NPROCS", {}, 1, kMaxInt));
  }
  DEVMESH_ASSIGN_OR_RETURN(info.local_rank,
                           Int(env, "SLURM_LOCALID", {}, 0, kMaxInt));
  if (env("SLURM_NTASKS_PER_NODE")) {
    DEVMESH_ASSIGN_OR_RETURN(info.local_world_size,
                             Int(env, "SLURM_NTASKS_PER_NODE", {}, 1, kMaxInt));
  } else if (std::optional<std::string> tpn = env("SLURM_TASKS_PER_NODE")) {
    DEVMESH_ASSIGN_OR_RETURN(const int node,
                             Int(env, "SLURM_NODEID", 0, 0, kMaxInt));
    int64_t total = 0;
    DEVMESH_ASSIGN_OR_RETURN(info.local_world_size,
                             TasksOnNode(*tpn, node, &total));
    if (total != info.world_size) {
      const char* world_var =
          env("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable SLURM_TASKS_PER_NODE='", *tpn,
          "' adds up to ", total, " tasks, but ", world_var, "=",
          info.world_size));
    }
  } else {
    return absl::InvalidArgumentError(
        "environment variables SLURM_NTASKS_PER_NODE and SLURM_TASKS_PER_NODE "
        "are both unset");
  }
  DEVMESH_ASSIGN_OR_RETURN(const bool external, ReadExternalStore(env, info));
  if (external) {
    // DEVMESH_STORE_ADDR names the store; MASTER_* are not read.
  } else if (std::optional<std::string> addr = env("MASTER_ADDR");
             addr && !addr->empty()) {
    DEVMESH_ASSIGN_OR_RETURN(info.store_host,
                             ParseStoreHost("MASTER_ADDR", *addr));
  } else {
    const char* var = "SLURM_JOB_NODELIST";
    std::optional<std::string> list = env(var);
    if (!list) list = env(var = "SLURM_NODELIST");
    if (!list) {
      return absl::InvalidArgumentError(
          "MASTER_ADDR, SLURM_JOB_NODELIST and SLURM_NODELIST are all unset: "
          "no store host");
    }
    absl::StatusOr<std::string> host = FirstHostOfNodeList(*list);
    if (!host.ok()) {
      return Bad(var, *list, absl::StrCat(": ", host.status().message()));
    }
    info.store_host = *host;
  }
  if (!external) {
    DEVMESH_ASSIGN_OR_RETURN(
        info.store_port, Int(env, "MASTER_PORT", kDefaultStorePort, 1, 65535));
  }
  DEVMESH_RETURN_IF_ERROR(CheckConsistent(info, "SLURM_PROCID", "SLURM_NTASKS",
                                          "SLURM_LOCALID", "tasks per node"));
  return info;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](absl::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<RendezvousInfo> RendezvousInfoFromEnv(const EnvLookup& env) {
  if (env("RANK")) return FromTorchrun(env);
  if (env("OMPI_COMM_WORLD_RANK")) return FromOpenMpi(env);
  if (env("SLURM_PROCID")) return FromSlurm(env);
  return absl::NotFoundError(
      "no rendezvous environment: none of RANK (torchrun), "
      "OMPI_COMM_WORLD_RANK (Open MPI), SLURM_PROCID (Slurm) is set");
}

absl::StatusOr<RendezvousInfo> RendezvousInfoFromEnv() {
  return RendezvousInfoFromEnv(ProcessEnv());
}

bool HasRendezvousEnv(const EnvLookup& env) {
  return env("RANK") || env("OMPI_COMM_WORLD_RANK") || env("SLURM_PROCID");
}

bool HasRendezvousEnv() { return HasRendezvousEnv(ProcessEnv()); }

absl::StatusOr<StoreAddress> ParseStoreAddress(absl::string_view var,
                                               absl::string_view value) {
  StoreAddress address;
  absl::string_view text = value;
  if (!absl::ConsumePrefix(&text, kEtcdScheme)) {
    if (text.find("://") != absl::string_view::npos) {
      return Bad(var, value,
                 "names a scheme other than etcd:// (host:port is devmesh's "
                 "store; etcd://host:port[,host:port...][/prefix] an etcd "
                 "cluster, without TLS)");
    }
    DEVMESH_RETURN_IF_ERROR(
        ParseHostPort(var, value, text, &address.host, &address.port));
    return address;
  }
  absl::string_view endpoints = text;
  absl::string_view prefix = kDefaultEtcdPrefix;
  if (const size_t slash = text.find('/'); slash != absl::string_view::npos) {
    endpoints = text.substr(0, slash);
    if (slash + 1 < text.size()) prefix = text.substr(slash);
  }
  if (endpoints.empty()) {
    return Bad(var, value,
               "names no etcd endpoint (etcd://host:port[,host:port...])");
  }
  for (absl::string_view endpoint : absl::StrSplit(endpoints, ',')) {
    if (endpoint.empty()) {
      return Bad(var, value, "has an empty etcd endpoint (two commas?)");
    }
    std::string host;
    int port = 0;
    DEVMESH_RETURN_IF_ERROR(ParseHostPort(var, value, endpoint, &host, &port));
    if (address.etcd_endpoints.empty()) {
      address.host = host;
      address.port = port;
    }
    address.etcd_endpoints.emplace_back(endpoint);
  }
  const bool unprintable = std::any_of(prefix.begin(), prefix.end(), [](char c) {
    return !absl::ascii_isgraph(static_cast<unsigned char>(c));
  });
  if (unprintable) {
    return Bad(var, value,
               "has a key prefix with whitespace or control characters");
  }
  address.etcd_prefix = std::string(prefix);
  if (address.etcd_prefix.back() != '/') address.etcd_prefix.push_back('/');
  return address;
}

absl::Status UseStoreAddress(absl::string_view address, RendezvousInfo& info) {
  DEVMESH_ASSIGN_OR_RETURN(StoreAddress parsed,
                           ParseStoreAddress("", address));
  info.store_host = std::move(parsed.host);
  info.store_port = parsed.port;
  info.etcd_endpoints = std::move(parsed.etcd_endpoints);
  info.etcd_prefix = std::move(parsed.etcd_prefix);
  info.external_store = true;
  return absl::OkStatus();
}

std::string StoreAddressText(const RendezvousInfo& info) {
  if (!info.etcd_endpoints.empty()) {
    return absl::StrCat(kEtcdScheme, absl::StrJoin(info.etcd_endpoints, ","),
                        info.etcd_prefix);
  }
  return absl::StrCat(info.store_host, ":", info.store_port);
}

absl::StatusOr<std::string> ParseStoreHost(absl::string_view var,
                                           absl::string_view value) {
  absl::string_view host = value;
  const bool bracketed = absl::ConsumePrefix(&host, "[");
  if (bracketed && !absl::ConsumeSuffix(&host, "]")) {
    return Bad(var, value,
               "opens a bracket it does not close where it ends (an IPv6 "
               "literal is \"::1\" or \"[::1]\"; the port goes in MASTER_PORT)");
  }
  if (host.empty()) return Bad(var, value, "names no host");
  const bool unprintable = std::any_of(host.begin(), host.end(), [](char c) {
    return !absl::ascii_isgraph(static_cast<unsigned char>(c));
  });
  if (unprintable || host.find_first_of("[]/") != absl::string_view::npos) {
    return Bad(var, value, "is not a host name or IP address");
  }
  const size_t colons = std::count(host.begin(), host.end(), ':');
  const size_t percent = host.find('%');
  if (percent != absl::string_view::npos &&
      (colons == 0 || percent + 1 == host.size())) {
    return Bad(var, value,
               "has a '%' that is not an IPv6 zone (\"fe80::1%eth0\")");
  }
  if (colons > 0) {
    // An IPv6 literal, with an optional %zone ("fe80::1%eth0").
    std::string addr(host.substr(0, percent));
    unsigned char scratch[16];
    if (colons == 1 || inet_pton(AF_INET6, addr.c_str(), scratch) != 1) {
      return Bad(var, value,
                 "is neither a host name nor an IP address (\"host:port\" is "
                 "not accepted: the port goes in MASTER_PORT)");
    }
  } else if (bracketed) {
    return Bad(var, value, "has brackets around something not IPv6");
  }
  return std::string(host);
}

absl::StatusOr<std::string> FirstHostOfNodeList(absl::string_view nodelist) {
  std::string host;
  int depth = 0;
  bool in_first_range = false;  // inside [...] and still in its first item
  for (char c : nodelist) {
    if (c == '[') {
      if (depth++ != 0) break;
      in_first_range = true;
    } else if (c == ']') {
      if (depth-- != 1) break;
    } else if (depth == 0) {
      if (c == ',') break;
      host.push_back(c);
    } else if (c == ',' || c == '-') {
      in_first_range = false;
    } else if (in_first_range) {
      host.push_back(c);
    }
  }
  if (depth != 0 || nodelist.find(']') < nodelist.find('[')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node list '", nodelist, "' has unbalanced brackets"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node list '", nodelist, "' names no host"));
  }
  return host;
}

}  // namespace devmesh
