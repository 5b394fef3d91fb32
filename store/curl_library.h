// devmesh/store/curl_library.h
// -----------------------------------------------------------------------------
// libcurl, loaded when the etcd store first sends a request instead of when
// the program starts. Every devmesh program links the etcd store (it is
// chosen at run time, by DEVMESH_STORE_ADDR=etcd://...), and Debian's
// libcurl brings about 30 shared libraries with it (TLS, Kerberos, LDAP,
// SSH, ...): loading and relocating them at start cost each process about
// 5 ms of CPU here (a //bench:startup process that only loads and exits:
// 8.2-9.5 ms with libcurl linked, 3.3-3.7 ms without), 5 s of CPU for a
// 1024-rank job that never talks to etcd. Loaded on first use, a job on the
// TCP store never maps them.
//
// The library is Debian's libcurl4 (libcurl.so.4, the soname that
// libcurl4-openssl-dev's headers belong to), found by the dynamic loader's
// usual search (dlopen); only the functions the etcd store calls are looked
// up, through libcurl's public API, and curl_global_init is called once.
#ifndef DEVMESH_STORE_CURL_LIBRARY_H_
#define DEVMESH_STORE_CURL_LIBRARY_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <curl/curl.h>

#include "absl/status/statusor.h"

namespace devmesh {
namespace store_internal {

// libcurl's functions that the etcd store uses, with libcurl's own
// signatures (curl/curl.h).
struct CurlLibrary {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_reset)(CURL*);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// Loads libcurl.so.4 and looks up every function of CurlLibrary the first
// time it is called (then calls curl_global_init(CURL_GLOBAL_DEFAULT)), and
// returns the same answer on every later call: the library, which stays
// loaded for the life of the process, or
//  - FailedPrecondition when libcurl.so.4 cannot be loaded (not installed:
//    the message names the library, the loader's reason and Debian's
//    package) or lacks one of the functions (the message names it);
//  - Internal when curl_global_init fails (its code in the message).
// Thread-safe: concurrent first calls load once.
absl::StatusOr<const CurlLibrary*> LoadCurlLibrary();

}  // namespace store_internal
}  // namespace devmesh

#endif  // DEVMESH_STORE_CURL_LIBRARY_H_
