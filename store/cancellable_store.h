// devmesh/store/cancellable_store.h
// -----------------------------------------------------------------------------
// CancellableStore: a Store decorator whose waiting calls (Get, Wait,
// MultiGet) can end before their timeout. It asks `cancel` before the call
// and again each time a slice of at most `slice` has passed without an
// answer (the base store's wait is cut into slices of that length): when
// `cancel` returns an error, the call returns that error instead of waiting
// on. MeshRuntime wraps group creation in one whose `cancel` is the failure
// watch's verdict, so that a creation waiting for a member found dead ends
// within about a slice of the verdict, with it, instead of at the group's
// timeout (without it, a death during Shrink's rebuild was found only at the
// creation timeout, 300 s by default); the shm backend wraps the creation of
// a Send/Recv pair in one whose `cancel` is the group's abort and liveness
// (comm/shm/shm_links.h).
//
// Cost: a wait answered within its first slice costs what it did on the base
// store; each further slice is one more wait on it (on devmesh's TCP store
// one round trip; on a c10d store a cancelled wait is CANCEL_WAIT plus a
// CHECK per key up to the first missing one). The other calls forward
// unchanged and are never cancelled.
//
// Errors: the base store's; DeadlineExceeded only when the caller's own
// timeout has passed (the base store's message of the last slice, with the
// whole timeout added), or when a slice ends with it well before its wait;
// `cancel`'s error when it ends the call.
//
// Thread-safety: as the base store; `cancel` may be called from any thread
// that calls a waiting method, concurrently.
#ifndef DEVMESH_STORE_CANCELLABLE_STORE_H_
#define DEVMESH_STORE_CANCELLABLE_STORE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/forwarding_store.h"
#include "store/store.h"

namespace devmesh {

class CancellableStore : public ForwardingStore {
 public:
  // OK: go on waiting; an error: end the waiting call with it.
  using CancelCheck = std::function<absl::Status()>;

  // `slice` must be positive (a non-positive one is taken as 1 s).
  CancellableStore(std::shared_ptr<Store> base, absl::Duration slice,
                   CancelCheck cancel);

  using Store::Get;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override;
  using Store::Wait;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override;
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override;

 private:
  absl::Duration slice_;
  CancelCheck cancel_;
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_CANCELLABLE_STORE_H_
