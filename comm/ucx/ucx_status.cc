// devmesh/comm/ucx/ucx_status.cc
#include "comm/ucx/ucx_status.h"

#include "absl/strings/str_cat.h"

namespace devmesh {
namespace ucx_internal {

absl::Status UcxStatus(ucs_status_t status, absl::string_view what) {
  if (status == UCS_OK) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
      return absl::UnavailableError(message);
    case UCS_ERR_MESSAGE_TRUNCATED:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_NO_MEMORY:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace ucx_internal
}  // namespace devmesh
