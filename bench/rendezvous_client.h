// devmesh/bench/rendezvous_client.h
// -----------------------------------------------------------------------------
// The client processes of //bench:rendezvous_scale: `count` store clients,
// each a thread with its own connection, that join one rendezvous (connect,
// set own key, add 1 to a counter, the client that brings it to `total`
// sets the "all" key, every client waits for it).
//
// Protocol with the driver, one line each way on stdin / stdout:
//   -> "port N"           (when hosting: the server is up on port N)
//   -> "ready"            (every client thread created and parked)
//   <- any line           (go)
//   -> "done F [error]"   (F clients failed; the first one's error)
// A hosting process keeps its server until stdin closes. Any failure before
// "done" is a line "error <what>" and exit status 1.
#ifndef DEVMESH_BENCH_RENDEZVOUS_CLIENT_H_
#define DEVMESH_BENCH_RENDEZVOUS_CLIENT_H_

#include <string>

namespace devmesh::bench {

struct RendezvousClientArgs {
  std::string host = "127.0.0.1";  // the server's address
  int port = 0;                    // 0: host the server on this process
  std::string bind = "127.0.0.1";  // the hosted server's bind address
  bool c10d = false;               // C10dStoreClient, else TcpStoreClient
  int first = 0;                   // this process's first client index
  int count = 0;                   // clients in this process
  int total = 0;                   // clients in the whole rendezvous
  std::string prefix;              // the trial's key prefix
};

// Runs one client process as above; returns its exit status (0 when it
// reported "done", whatever F is).
int RunRendezvousClients(const RendezvousClientArgs& args);

}  // namespace devmesh::bench

#endif  // DEVMESH_BENCH_RENDEZVOUS_CLIENT_H_
