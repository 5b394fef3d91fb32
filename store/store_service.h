// devmesh/store/store_service.h
// -----------------------------------------------------------------------------
// StoreService: what the TCP store server does with each request, apart from
// the network. It owns the KvTable, checks each client's handshake (magic,
// version, token), answers requests, and parks Get/Wait/MultiGet requests on
// missing keys until the keys arrive (answered through TakeCompleted) or the
// transport's timer fires (Expire). A parked request waits on one missing key
// at a time (its cursor), so a Wait on N keys costs O(N) over its whole life
// however the keys arrive.
//
// c10d's queues and barriers (served for the c10d sessions, in one key space
// with the table; the semantics of torch 2.15's libuv server):
//   - kQueuePush/kQueuePop/kQueueLen: a FIFO of values per key, apart from
//     the table (NumKeys and ListKeys do not count queues). A non-empty
//     queue counts as a present key for Wait and Check (not for Get or
//     MultiGet); a push completes at most one parked Wait on its key (the
//     first whose keys are then all present), as torch's server wakes one.
//   - kBarrier: adds 1 to the decimal counter at the key (a missing key is
//     0; a value that is no decimal int64 is refused as Add refuses it); the
//     call whose count reaches the world size is answered at once and
//     releases every barrier parked on the key. Any other write of the key
//     (Set, Add, CompareSet, Append, MultiSet) releases them too, as it does
//     on torch's server. A parked barrier has no timer: Expire cancels it.
//     One difference: a Wait on the key is complete as soon as a barrier
//     creates the counter (torch's server leaves it parked until the
//     barrier is released).
//
// Requests with timeout 0 (the c10d sessions' GET and MULTI_GET) never park:
// they are answered at once, so a client may send them while another of its
// requests is parked. A client holds at most one parked request: a second
// one that would park is refused (FailedPrecondition, close).
//
// Thread-safety: none; the server's loop thread owns it.
#ifndef DEVMESH_STORE_STORE_SERVICE_H_
#define DEVMESH_STORE_STORE_SERVICE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/kv_table.h"
#include "store/wire_format.h"

namespace devmesh {

class StoreService {
 public:
  using ClientId = uint64_t;

  // What to do after a request.
  struct Outcome {
    std::optional<std::string> reply;  // a frame to send now
    bool close = false;                // drop the client after the reply
    // >= 0: parked; start a timer. A parked barrier has none (-1 and no
    // reply): IsParked tells.
    int64_t park_timeout_ms = -1;
  };

  explicit StoreService(std::string token) : token_(std::move(token)) {}

  // Handles one request payload from `client`. The first request of a client
  // must be a valid kHello.
  Outcome Handle(ClientId client, absl::string_view payload);

  // The parked request of `client` timed out or was cancelled: its
  // DeadlineExceeded reply. Empty when the client has nothing parked.
  std::string Expire(ClientId client);

  // `client` disconnected: forget its handshake and parked request.
  void Forget(ClientId client);

  // Whether `client` has a parked request (its later frames must wait).
  bool IsParked(ClientId client) const { return parked_.contains(client); }

  // Replies of parked requests completed since the last call.
  std::vector<std::pair<ClientId, std::string>> TakeCompleted();

 private:
  // A decoded waiting request and the bytes its views point into. Clients
  // that wait on byte-identical requests (every rank of a rendezvous waiting
  // on the same N keys) share one copy, so parked memory stays O(N), not
  // O(N^2).
  struct SharedRequest {
    std::string payload;
    Request request;
    // Keys before this index were all present at the last scan by any of
    // the sharers, so a rendezvous scans its N keys O(N) times in all, not
    // once per client.
    mutable size_t scanned = 0;
  };
  struct Parked {
    std::shared_ptr<const SharedRequest> shared;
    size_t cursor = 0;  // keys before it were present when last checked
    const Request& request() const { return shared->request; }
  };

  Outcome HandleHello(ClientId client, const Request& request);
  // The shared copy of a waiting request's payload (decoded once), made or
  // found. InvalidArgument when it does not decode.
  absl::StatusOr<std::shared_ptr<const SharedRequest>> Share(
      absl::string_view payload);
  Outcome HandleOp(ClientId client, const Request& request);
  Outcome Park(ClientId client, absl::string_view payload);
  // A Get/Wait/MultiGet with timeout 0: answered now, never parked.
  Outcome Immediate(const Request& request) const;
  Outcome HandleBarrier(ClientId client, absl::string_view payload,
                        const Request& request);
  // Whether `key` counts as present for `op` (a non-empty queue counts for
  // Wait and Check).
  bool Present(Op op, absl::string_view key) const;
  // After a write of `key` (`created`: it was missing before): wakes the
  // requests parked on it and releases the barriers parked on it.
  void KeyWritten(absl::string_view key, bool created);
  // Answers every barrier parked on `key`.
  void ReleaseBarriers(absl::string_view key);
  // After a push on queue `key`: completes the first parked Wait on it whose
  // keys are then all present.
  void WakeOneQueueWaiter(absl::string_view key);
  // Moves the cursor past present keys; registers the client on the first
  // missing key and returns false, or returns true when all are present.
  bool Advance(ClientId client, Parked& parked);
  // The OK reply of a Get/Wait/MultiGet whose keys are all present.
  std::string CompleteReply(const Request& request) const;
  // Wakes the requests parked on `key`, just added.
  void KeyAdded(absl::string_view key);
  // Removes `client`'s parked request and drops its shared copy when unused.
  void Unpark(ClientId client);

  const std::string token_;
  KvTable table_;
  absl::flat_hash_map<ClientId, bool> greeted_;
  absl::flat_hash_map<ClientId, std::unique_ptr<Parked>> parked_;
  // Shared copies by payload (the key views the map's own payload).
  absl::flat_hash_map<absl::string_view, std::shared_ptr<const SharedRequest>>
      shared_requests_;
  absl::flat_hash_map<std::string, std::vector<ClientId>> waiters_;
  absl::flat_hash_map<std::string, std::vector<ClientId>> barrier_waiters_;
  absl::flat_hash_map<std::string, std::deque<std::string>> queues_;
  std::vector<std::pair<ClientId, std::string>> completed_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_STORE_SERVICE_H_
