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
// Thread-safety: none; the server's loop thread owns it.
#ifndef DEVMESH_STORE_STORE_SERVICE_H_
#define DEVMESH_STORE_STORE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
    int64_t park_timeout_ms = -1;      // >= 0: parked; start a timer
  };

  explicit StoreService(std::string token) : token_(std::move(token)) {}

  // Handles one request payload from `client`. The first request of a client
  // must be a valid kHello.
  Outcome Handle(ClientId client, absl::string_view payload);

  // The parked request of `client` timed out: its DeadlineExceeded reply.
  // Empty when the client has nothing parked.
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
  Outcome HandleOp(ClientId client, const Request& request);
  Outcome Park(ClientId client, absl::string_view payload);
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
  std::vector<std::pair<ClientId, std::string>> completed_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_STORE_SERVICE_H_
