#include "store/curl_library.h"

#include <dlfcn.h>

#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace devmesh {
namespace store_internal {
namespace {

constexpr char kSoname[] = "libcurl.so.4";

absl::StatusOr<const CurlLibrary*> Load() {
  // RTLD_LOCAL: libcurl's symbols stay out of the global namespace (nothing
  // else in the process binds to them through this handle).
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "the etcd store needs libcurl, and ", kSoname, " could not be loaded (",
        why != nullptr ? why : "no reason given",
        "); install Debian's libcurl4 (tools/install.sh does)"));
  }
  static CurlLibrary lib;
  absl::Status missing;
  auto find = [&](auto& fn, const char* name) {
    void* sym = dlsym(handle, name);
    if (sym == nullptr && missing.ok()) {
      missing = absl::FailedPreconditionError(absl::StrCat(
          kSoname, " has no ", name, "; the etcd store needs libcurl 7.x or "
          "8.x (Debian's libcurl4)"));
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
  };
  find(lib.easy_init, "curl_easy_init");
  find(lib.easy_setopt, "curl_easy_setopt");
  find(lib.easy_perform, "curl_easy_perform");
  find(lib.easy_getinfo, "curl_easy_getinfo");
  find(lib.easy_reset, "curl_easy_reset");
  find(lib.easy_cleanup, "curl_easy_cleanup");
  find(lib.easy_strerror, "curl_easy_strerror");
  find(lib.slist_append, "curl_slist_append");
  find(lib.slist_free_all, "curl_slist_free_all");
  CURLcode (*global_init)(long) = nullptr;
  find(global_init, "curl_global_init");
  if (!missing.ok()) return missing;
  if (const CURLcode code = global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
    return absl::InternalError(absl::StrCat(
        "curl_global_init failed with CURLcode ", static_cast<int>(code)));
  }
  return &lib;
}

}  // namespace

absl::StatusOr<const CurlLibrary*> LoadCurlLibrary() {
  static const absl::StatusOr<const CurlLibrary*>* const loaded =
      new absl::StatusOr<const CurlLibrary*>(Load());
  return *loaded;
}

}  // namespace store_internal
}  // namespace devmesh
