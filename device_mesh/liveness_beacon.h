// devmesh/device_mesh/liveness_beacon.h
// -----------------------------------------------------------------------------
// The liveness beacon (internal to //device_mesh): how a rank on another host
// learns that a peer's process is gone without waiting for its lease.
//
// Each process that starts a failure watch listens on one TCP port of all its
// IPv4 addresses (StartBeacon: once per process, never closed). Its thread
// greets every connection with "devmesh-beacon <nonce>\n" (a random number of
// this process) and holds it open until the other end closes it. Nothing in
// the process ever closes the listener or a connection, so when the process
// dies (SIGKILL included) its kernel closes them: a prober's connection ends
// and a new connect is refused. A host that dies, or a process that is
// stopped, closes nothing: the lease decides those (rank_liveness.h).
//
// BeaconProbe follows one peer's beacon without blocking: each Poll advances
// a connect, reads the greeting, or looks for the connection's end, and says
// kGone only on a refusal that means the peer's listener is gone:
//   - a refusal at an address that once greeted with the peer's nonce, or
//   - a refusal where `credible_refusal` (the caller's judgement: an address
//     that is not loopback and not the caller's own, which reaches the
//     peer's host as the rank's groups do, or any address shared with the
//     peer's kernel and network namespace).
// A connection that ends is followed by one connect again: refused is gone,
// greeted with the nonce is alive. Anything else (a timeout, an unreachable
// host, a greeting with another nonce: someone else's port) gives kUnknown,
// and the prober tries again at most every 5 s; the lease decides meanwhile.
//
// Thread-safety: StartBeacon may be called from any thread. A BeaconProbe is
// used by one thread at a time (its owner locks).
#ifndef DEVMESH_DEVICE_MESH_LIVENESS_BEACON_H_
#define DEVMESH_DEVICE_MESH_LIVENESS_BEACON_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace devmesh {
namespace device_mesh_internal {

// This process's beacon: its port (0 when it could not listen: then no
// beacon is published) and its nonce. Starts it on the first call.
struct BeaconInfo {
  int port = 0;
  uint64_t nonce = 0;
};
BeaconInfo StartBeacon();

// True for an IPv4 literal in 127.0.0.0/8 (a beacon published there is
// reachable from the peer's own network namespace only).
bool IsLoopbackIPv4(const std::string& host);

enum class BeaconState {
  kUnknown,  // not known yet, or the beacon cannot tell (the lease decides)
  kAlive,    // connected, greeted with the peer's nonce
  kGone,     // refused where that means the peer's listener is gone
};

class BeaconProbe {
 public:
  BeaconProbe(std::string host, int port, uint64_t nonce,
              bool credible_refusal);
  ~BeaconProbe();
  BeaconProbe(const BeaconProbe&) = delete;
  BeaconProbe& operator=(const BeaconProbe&) = delete;

  // Advances without blocking (non-blocking sockets, poll with no wait) and
  // returns what is known. kGone stays kGone.
  BeaconState Poll();

  // Whether the peer's nonce was ever read at this address.
  bool verified() const { return verified_; }

 private:
  enum class Step { kIdle, kConnecting, kGreeting, kConnected, kGone, kWait };
  void Connect();
  void Refused();
  void GiveUp();
  void CloseFd();

  const std::string host_;
  const int port_;
  const uint64_t nonce_;
  const bool credible_refusal_;
  Step step_ = Step::kIdle;
  int fd_ = -1;
  bool verified_ = false;
  std::string greeting_;
  absl::Time step_since_ = absl::InfinitePast();  // connect or greeting began;
                                                  // kWait: when it began
};

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_LIVENESS_BEACON_H_
