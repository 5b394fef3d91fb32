// devmesh/comm/ucx/ucx_status.h
// -----------------------------------------------------------------------------
// The one place where UCX's ucs_status_t becomes an absl::Status.
//
//   UCS_OK                        OK
//   UCS_ERR_CANCELED              Cancelled
//   UCS_ERR_TIMED_OUT, UCS_ERR_ENDPOINT_TIMEOUT
//                                 DeadlineExceeded
//   UCS_ERR_CONNECTION_RESET, UCS_ERR_UNREACHABLE, UCS_ERR_REJECTED,
//   UCS_ERR_NOT_CONNECTED, UCS_ERR_IO_ERROR
//                                 Unavailable (a peer or the path to it)
//   UCS_ERR_MESSAGE_TRUNCATED     InvalidArgument (the members' calls differ)
//   UCS_ERR_NO_MEMORY             ResourceExhausted
//   others                        Internal
// The message is "<what>: <UCX's own status string>".
//
// Thread-safety: pure.
#ifndef DEVMESH_COMM_UCX_UCX_STATUS_H_
#define DEVMESH_COMM_UCX_UCX_STATUS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <ucs/type/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace devmesh {
namespace ucx_internal {

absl::Status UcxStatus(ucs_status_t status, absl::string_view what);

}  // namespace ucx_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_UCX_UCX_STATUS_H_
