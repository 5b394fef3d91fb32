// devmesh/bench/store_peers.h
// -----------------------------------------------------------------------------
// The store servers //bench:store_ops compares, and clients for each:
//   server "devmesh", protocol "devmesh": TcpStoreServer + TcpStoreClient
//   server "devmesh", protocol "c10d":    TcpStoreServer + C10dStoreClient
//   server "torch",   protocol "c10d":    torch.distributed.TCPStore (libuv
//       server, PyTorch's default) hosted by a Python process from the torch
//       venv ($DEVMESH_TORCH_VENV, default /opt/devmesh/torch-venv) that this
//       process starts and stops + C10dStoreClient
// Both servers run on this machine, on loopback. Devmesh's server runs in a
// process of its own (//store:server, as torch's does, and as a rank's
// clients meet rank 0's server or a standalone one), or, with
// DevmeshServer::kThread, on a thread of this process (its clients' process).
//
// Thread-safety: StartPeers / StopPeers from main only; NewStoreClient from
// any thread after StartPeers.
#ifndef DEVMESH_BENCH_STORE_PEERS_H_
#define DEVMESH_BENCH_STORE_PEERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/store.h"

namespace devmesh::bench {

enum class Peer { kDevmesh = 0, kDevmeshC10d = 1, kTorch = 2 };
inline constexpr Peer kAllPeers[] = {Peer::kDevmesh, Peer::kDevmeshC10d,
                                     Peer::kTorch};
// "devmesh" / "torch", and "devmesh" / "c10d".
const char* ServerName(Peer peer);
const char* ProtocolName(Peer peer);

// Where devmesh's server runs: a //store:server process, or a thread of
// this process.
enum class DevmeshServer { kProcess, kThread };

// Starts devmesh's server, and torch's when the venv is there. Returns the
// note to print when torch's cannot be started (empty when it runs). Errors:
// NotFound (kProcess: //store:server is not built beside this binary),
// Internal (it did not start or print its address), those of
// TcpStoreServer::Start (kThread).
absl::StatusOr<std::string> StartPeers(DevmeshServer where);
// Whether torch's server runs.
bool HasTorchPeer();
// Pins every thread of the server processes (devmesh's when it has one, and
// torch's) to the CPUs in `cpus` (sched_setaffinity). Errors:
// InvalidArgument (an empty set), Internal (the kernel refused).
absl::Status PinServers(const std::vector<int>& cpus);

// Stops the servers (SIGTERM to their processes, then waits for them).
void StopPeers();

// A client of `peer`'s server. Errors: those of the client's Connect.
absl::StatusOr<std::unique_ptr<Store>> NewStoreClient(Peer peer);

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_STORE_PEERS_H_
