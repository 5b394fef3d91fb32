// devmesh/comm/registry.h
// -----------------------------------------------------------------------------
// Backend registry: creates a Communicator by backend name. A program that
// depends on @devmesh//comm has "shm", "ucx" and "nccl" (nccl answers
// Unavailable in a build without a CUDA toolkit); "gloo" is opt-in: it is
// registered only in a program that depends on @devmesh//comm:gloo (that
// target registers it when the program starts). RegisterBackend adds others
// (tests, plug-ins): a class derived from Communicator that overrides its
// protected Do* functions and identity accessors (comm/communicator.h), made
// by the factory, the codec of its options and its traits
// (comm/backend_options.h). device_mesh uses this for its backend override
// (R19 in docs/BEHAVIOURS.md), and asks it about backends by name (TraitsOf,
// RegisteredDefaultBackendFor, ...) instead of comparing names.
//
// Thread-safety: every function may be called from any thread.
#ifndef DEVMESH_COMM_REGISTRY_H_
#define DEVMESH_COMM_REGISTRY_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "store/store.h"
#include "comm/backend_options.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "comm/option_fields.h"
#include "comm/options.h"

namespace devmesh {

// Creates a communicator of backend `backend` ("shm", "ucx", "nccl", "gloo"
// where linked, or a registered name).
// Errors:
//   NotFound     `backend` is not registered (CheckBackendLinked's text)
//   Unavailable  "nccl" in a build without NCCL ("devmesh was built without
//                NCCL")
//   InvalidArgument  a DEVMESH_* variable that devmesh does not know or
//                whose value does not parse (config/settings.h), naming it
//   others       the backend's own (InvalidArgument for bad
//                rank/size/options, DeadlineExceeded when peers do not
//                arrive within options.timeout, ...)
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    absl::string_view backend, std::shared_ptr<Store> store, int rank,
    int size, const CommOptions& options = CommOptions());

// Registers `factory` under `name`, with the codec of its options and its
// traits (comm/backend_options.h; empty: the backend has no typed options,
// default traits).
// Errors:
//   InvalidArgument  an empty name; a null factory
//   AlreadyExists    `name` is taken
absl::Status RegisterBackend(absl::string_view name,
                             CommunicatorFactory factory,
                             BackendOptionsCodec options = {},
                             BackendTraits traits = {});

// The registered names, sorted: the backends linked into this program.
std::vector<std::string> KnownBackends();

// backend's agreed option fields of `options` (its codec's agreed_fields,
// comm/backend_options.h); {} for a backend with none, or not registered.
std::vector<OptionField> AgreedOptionFields(absl::string_view backend,
                                            const CommOptions& options);

// Sets backend's agreed fields in `options` from `fields`, every other
// field left as it was (its codec's set_agreed_fields).
// Errors:
//   NotFound         `backend` is not registered (CheckBackendLinked's text)
//   InvalidArgument  the codec's refusals (naming the field); fields given
//                    to a backend that has none ("backend \"x\" has no
//                    agreed option fields, got N")
absl::Status SetAgreedOptionFields(absl::string_view backend,
                                   absl::Span<const OptionField> fields,
                                   CommOptions* options);

// backend's local option fields of `options` as text; "" for a backend
// with none, or not registered.
std::string LocalOptionFields(absl::string_view backend,
                              const CommOptions& options);

// Fills backend's place-dependent defaults in `options` (NCCL: cuda_device
// from place.local_rank when unset); OK and `options` unchanged for a
// backend with none, or not registered (its creation then fails NotFound).
// Errors: the codec's (NCCL: Unavailable when no GPU is visible).
absl::Status FillLocalOptionDefaults(absl::string_view backend,
                                     const LocalPlace& place,
                                     CommOptions* options);

// Sets the calling thread up for backend's groups (NCCL: the local rank's
// GPU becomes the current device); OK for a backend that needs nothing, or
// not registered.
// Errors: the codec's (NCCL: UseLocalCudaDevice's).
absl::Status PrepareThreadFor(absl::string_view backend,
                              const LocalPlace& place);

// The traits `backend` registered (comm/backend_options.h); default
// BackendTraits (every trait off) for a name not registered, such as
// "auto" or "two_level". Never fails.
BackendTraits TraitsOf(absl::string_view backend);

// The registered backend whose traits name `device_type` among
// default_for_device_types ("cuda" -> "nccl"); "" when none does. When
// several do, the first by name. (comm/auto_group.h's
// DefaultGroupBackendFor adds "cpu" -> "auto".)
std::string RegisteredDefaultBackendFor(absl::string_view device_type);

// Whether `backend`'s groups must be made on a thread it has set up
// (PrepareThreadFor: its codec has a prepare_thread; NCCL: a new thread's
// current CUDA device is 0, not the local rank's). False for a name not
// registered.
bool NeedsPreparedThread(absl::string_view backend);

// Runs every registered backend's fill_process_fields on `options`
// (comm/backend_options.h: Gloo's store route), for a group of any backend
// made by a process at `place`. Never fails.
void FillProcessFields(const LocalPlace& place, CommOptions* options);

// The registered backend whose codec reads the typed options of type
// `options_type` (BackendOptionsCodec::typed_options; NcclOptions ->
// "nccl"); "" when none does, and for void (no typed options). Never
// fails.
std::string BackendReadingOptions(std::type_index options_type);

// The backend names a program may give, for an error message: the linked
// ones quoted and sorted, then devmesh's opt-in backends that are not
// linked with the target that brings them: `"nccl", "shm", "ucx", or
// "gloo" with @devmesh//comm:gloo linked`.
std::string BackendChoicesText();

// OK when `backend` is registered. Errors: NotFound otherwise: for one of
// devmesh's opt-in backends ("gloo") `backend "gloo" is not linked into this
// program: add "@devmesh//comm:gloo" to its deps (linked: nccl, shm, ucx)`,
// for any other name `unknown communicator backend "x"; known: ...`.
absl::Status CheckBackendLinked(absl::string_view backend);

}  // namespace devmesh

#endif  // DEVMESH_COMM_REGISTRY_H_
