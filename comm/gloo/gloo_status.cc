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

absl::Status GlooCall(absl::string_view what, absl::FunctionRef<void()> fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const ::gloo::IoException& e) {
    std::string text = e.what();
    const std::string lower = absl::AsciiStrToLower(text);
    if (absl::StrContains(lower, "timed out") ||
        absl::StrContains(lower, "timeout")) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": ", text));
    }
    return absl::UnavailableError(
        absl::StrCat(what, ": peer unreachable or gone: ", text));
  } catch (const ::gloo::EnforceNotMet& e) {
    return absl::InternalError(
        absl::StrCat(what, ": gloo precondition failed: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(what, ": an exception that is not a std::exception"));
  }
}

}  // namespace gloo_internal
}  // namespace devmesh
