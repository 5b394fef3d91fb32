// devmesh/comm/gloo/gloo_status.cc
#include "comm/gloo/gloo_status.h"

#include <exception>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"

namespace devmesh {
namespace gloo_internal {

StoreStatusError::StoreStatusError(absl::Status status)
    : std::runtime_error(status.ToString()), status_(std::move(status)) {}

absl::Status GlooCall(absl::string_view what, absl::FunctionRef<void()> fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const StoreStatusError& e) {
    return absl::Status(e.status().code(),
                        absl::StrCat(what, ": store: ", e.status().message()));
  } catch (const ::gloo::IoException& e) {
    std::string text = e.what();
    if (absl::StrContains(absl::AsciiStrToLower(text), "timed out")) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": ", text));
    }
    return absl::UnavailableError(
        absl::StrCat(what, ": peer unreachable or gone: ", text));
  } catch (const ::gloo::EnforceNotMet& e) {
    return absl::InternalError(
        absl::StrCat(what, ": gloo precondition failed: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace gloo_internal
}  // namespace devmesh
