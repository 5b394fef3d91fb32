// devmesh/comm/gloo/gloo_status.h
// -----------------------------------------------------------------------------
// The one place where Gloo's exceptions become absl::Status (STYLE.md: one
// conversion point per backend). Gloo reports errors by throwing
// gloo::IoException (socket errors, peer gone, timeouts), gloo::EnforceNotMet
// (violated preconditions) and gloo::Exception; the store adapter throws
// StoreStatusError to carry a devmesh Store status through Gloo unchanged.
//
// Mapping: StoreStatusError -> its status; IoException whose text says
// "Timed out" -> DeadlineExceeded; other IoException -> Unavailable (peer
// closed the connection or is unreachable); EnforceNotMet, Exception and any
// other std::exception -> Internal. Every message starts with `what`.
// Thread-safety: GlooCall is reentrant.
#ifndef DEVMESH_COMM_GLOO_GLOO_STATUS_H_
#define DEVMESH_COMM_GLOO_GLOO_STATUS_H_

#include <stdexcept>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace devmesh {
namespace gloo_internal {

// Thrown by the Gloo store adapter when a devmesh Store call fails.
class StoreStatusError : public std::runtime_error {
 public:
  explicit StoreStatusError(absl::Status status);
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Runs `fn` and returns OK, or the Status for the exception it threw,
// prefixed with `what` (e.g. "gloo allreduce").
absl::Status GlooCall(absl::string_view what, absl::FunctionRef<void()> fn);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_STATUS_H_
