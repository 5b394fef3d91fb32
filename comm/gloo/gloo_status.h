// devmesh/comm/gloo/gloo_status.h
// -----------------------------------------------------------------------------
// The one place where Gloo's exceptions become absl::Status (STYLE.md: one
// conversion point per backend). Gloo reports errors by throwing
// gloo::IoException (socket errors, peer gone, timeouts), gloo::EnforceNotMet
// (violated preconditions) and gloo::Exception.
//
// Mapping: IoException whose text says "timed out" or "timeout" (Gloo's
// "Timed out waiting ...", "Connect timeout", "Read timeout") ->
// DeadlineExceeded; other IoException -> Unavailable (peer closed the
// connection or is unreachable); EnforceNotMet, Exception, any other
// exception -> Internal. Every message starts with `what`. Nothing escapes.
// Thread-safety: GlooCall is reentrant.
#ifndef DEVMESH_COMM_GLOO_GLOO_STATUS_H_
#define DEVMESH_COMM_GLOO_GLOO_STATUS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace devmesh {
namespace gloo_internal {

// Runs `fn` and returns OK, or the Status for the exception it threw,
// prefixed with `what` (e.g. "gloo allreduce").
absl::Status GlooCall(absl::string_view what, absl::FunctionRef<void()> fn);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_STATUS_H_
