// devmesh/bootstrap/rendezvous.h
// -----------------------------------------------------------------------------
// Rendezvous from the environment: who am I (rank, world size, local rank on
// this host) and where is the store (rank 0's host and port), read from the
// variables of the launcher that started this process. Families, in order of
// precedence (the first whose rank variable is set wins):
//
//   "torchrun": RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (all required),
//               LOCAL_RANK, LOCAL_WORLD_SIZE (optional; default RANK and
//               WORLD_SIZE, i.e. one host). Also what LaunchLocal sets.
//               TORCHELASTIC_USE_AGENT_STORE == "True" (the exact string, as
//               PyTorch tests it): torchrun's agent already hosts a c10d
//               TCPStore on MASTER_ADDR:MASTER_PORT (use_agent_store), and
//               devmesh's keys go under "devmesh/<TORCHELASTIC_RUN_ID>/
//               attempt_<TORCHELASTIC_RESTART_COUNT>" (run id "none" and
//               attempt 0 when unset), because that store outlives restarts
//               and holds PyTorch's keys too.
//   "openmpi":  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE and
//               MASTER_ADDR (required), MASTER_PORT (default 29500).
//   "slurm":    SLURM_PROCID, SLURM_NTASKS (or SLURM_NPROCS), SLURM_LOCALID
//               (required); tasks on this node from SLURM_NTASKS_PER_NODE or
//               SLURM_TASKS_PER_NODE ("2(x3),1" form, entry SLURM_NODEID);
//               store host MASTER_ADDR, else the first host of
//               SLURM_JOB_NODELIST / SLURM_NODELIST ("node[01-04],x" ->
//               "node01"); port MASTER_PORT, else 29500.
//
// A store outside the ranks (every family): DEVMESH_STORE_ADDR="host:port"
// (kExternalStoreVar; an IPv6 host in brackets, "[::1]:29500") names a
// devmesh store that already listens there and outlives the ranks (a
// //store:server, or //bootstrap:launch --host_store, which sets it). Then no
// rank hosts a store: every rank, rank 0 included, joins it as a devmesh-
// protocol client (external_store). It takes precedence over the rest:
// MASTER_ADDR and MASTER_PORT are not read for the store (nor required; a
// PyTorch rank 0 in the same job may still bind MASTER_PORT for its own
// store), and TORCHELASTIC_USE_AGENT_STORE is ignored (use_agent_store stays
// false; devmesh's keys are not put under the torchrun namespace, so one
// external store serves one job at a time). Unset: as below.
// DEVMESH_STORE_ADDR="etcd://host:port[,host:port...][/prefix]" names an
// etcd cluster instead (store/etcd_store.h): every rank joins it with an
// EtcdStore on those client endpoints, and every key of the job lives under
// `prefix` in etcd (default "/devmesh/"; a '/' is added when it does not end
// with one), so that one etcd serves several jobs, each with a prefix of its
// own. ParseStoreAddress is the one parser of both forms.
//
// Store host (MASTER_ADDR in every family): a host name, an IPv4 literal, or
// an IPv6 literal bare ("::1", "fe80::1%eth0") or in brackets ("[::1]"; the
// brackets are removed). "host:port" and "[::1]:29500" are rejected (the
// port goes in MASTER_PORT).
//
// Errors (InvalidArgument, naming the variable and its value): a
// DEVMESH_STORE_ADDR that ParseStoreAddress refuses, a required
// variable missing, not an integer, out of range (port outside 1..65535,
// sizes < 1), malformed (a store host as above), or contradictory (RANK >=
// WORLD_SIZE, LOCAL_RANK >= LOCAL_WORLD_SIZE, LOCAL_WORLD_SIZE > WORLD_SIZE;
// Slurm's per-node task counts, expanded, not adding up to SLURM_NTASKS);
// NotFound when no family's rank variable is set at all.
//
// Thread-safety: pure functions of the lookup; the getenv overloads read the
// process environment (do not call them while another thread sets it).
#ifndef DEVMESH_BOOTSTRAP_RENDEZVOUS_H_
#define DEVMESH_BOOTSTRAP_RENDEZVOUS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

inline constexpr int kDefaultStorePort = 29500;  // torchrun's default
// "host:port" of a store outside the ranks (see the top of this file).
inline constexpr char kExternalStoreVar[] = "DEVMESH_STORE_ADDR";

struct RendezvousInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // Where every rank reaches the store (DEVMESH_STORE_ADDR, else
  // MASTER_ADDR; Slurm: else the first node): rank 0's TcpStoreServer, which
  // itself listens on every interface (BootstrapOptions::server_bind_host),
  // torchrun's agent store (use_agent_store), or an external store
  // (external_store).
  std::string store_host;
  int store_port = 0;
  std::string source;  // "torchrun", "slurm" or "openmpi"
  // torchrun's agent hosts a c10d TCPStore at store_host:store_port: no rank
  // hosts one; every rank joins it as a c10d client (C10dStoreClient).
  bool use_agent_store = false;
  // With use_agent_store: the prefix of every devmesh key in that store.
  std::string store_namespace;
  // DEVMESH_STORE_ADDR was set: a devmesh store outside the ranks listens at
  // store_host:store_port; no rank hosts one, every rank joins it.
  bool external_store = false;
  // An etcd cluster is the store (DEVMESH_STORE_ADDR=etcd://..., or set from
  // code with UseStoreAddress): its client endpoints ("host:port", an IPv6
  // host in brackets) and the job's key prefix (ends with '/'). Empty: not
  // etcd. With etcd, external_store is true and store_host:store_port is the
  // first endpoint.
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix;
};

// A store address as DEVMESH_STORE_ADDR writes it (see the top of this file).
struct StoreAddress {
  // devmesh's TCP store (and, with etcd, the first endpoint): the host
  // (brackets removed) and port.
  std::string host;
  int port = 0;
  // etcd://: every endpoint as "host:port" (IPv6 in brackets), and the key
  // prefix (ends with '/'). Empty endpoints: devmesh's TCP store.
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix;
};

// The prefix of an etcd store's keys when the address names none.
inline constexpr char kDefaultEtcdPrefix[] = "/devmesh/";

// Parses `value`, read from variable `var` (named in errors), as
// "host:port" or "etcd://host:port[,host:port...][/prefix]". Errors
// (InvalidArgument naming `var` and `value`): not host:port, no host, an
// IPv6 host without brackets, a port outside 1..65535, a host ParseStoreHost
// refuses; for etcd:// also no endpoint, an empty endpoint (",,"), a prefix
// with whitespace or control characters, and any other scheme ("http://",
// "https://": etcd's TLS is not supported).
absl::StatusOr<StoreAddress> ParseStoreAddress(absl::string_view var,
                                               absl::string_view value);

// Makes `info` join the store at `address` (ParseStoreAddress's forms, from
// code; errors say "store address '<address>' ..."): sets store_host,
// store_port, external_store, and for etcd etcd_endpoints and etcd_prefix
// (cleared otherwise). `info` is unchanged on error.
absl::Status UseStoreAddress(absl::string_view address, RendezvousInfo& info);

// The store of `info` as one string, what every rank must agree on:
// "host:port", or "etcd://a:1,b:2/prefix/".
std::string StoreAddressText(const RendezvousInfo& info);

// Looks up an environment variable: its value, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(absl::string_view)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

absl::StatusOr<RendezvousInfo> RendezvousInfoFromEnv(const EnvLookup& env);
absl::StatusOr<RendezvousInfo> RendezvousInfoFromEnv();

// True when any family's rank variable (RANK, OMPI_COMM_WORLD_RANK,
// SLURM_PROCID) is set: this process was started by a launcher and should
// join its job rather than launch itself.
bool HasRendezvousEnv(const EnvLookup& env);
bool HasRendezvousEnv();

// The store host in `value` of variable `var` (see the top of this file): the host
// itself, brackets removed. InvalidArgument naming `var` otherwise: empty,
// whitespace or control characters, "host:port" forms, brackets around
// something not IPv6, an IPv6 literal inet_pton refuses, a '%' that is not
// a non-empty zone of an IPv6 literal ("::1%", "node%eth0").
absl::StatusOr<std::string> ParseStoreHost(absl::string_view var,
                                           absl::string_view value);

// The first host of a Slurm node list: "node[01-04,07],gpu9" -> "node01",
// "a[1-2]b[3]" -> "a1b3", "x" -> "x". InvalidArgument on an empty list or
// unbalanced brackets.
absl::StatusOr<std::string> FirstHostOfNodeList(absl::string_view nodelist);

}  // namespace devmesh

#endif  // DEVMESH_BOOTSTRAP_RENDEZVOUS_H_
