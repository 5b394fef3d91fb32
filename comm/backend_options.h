// devmesh/comm/backend_options.h
// -----------------------------------------------------------------------------
// What a backend registers (comm/registry.h): its CommunicatorFactory and
// a BackendOptionsCodec, its options type-erased: which of its fields every
// member of a group must agree on, how those fields are made back into
// CommOptions, which fields each member sets for itself, and the defaults
// that depend on where the process runs (NCCL's GPU by local rank); and its
// BackendTraits, the facts about its groups that callers act on (the
// device type it is the default of, whether its calls are verified by
// default or checked in band, whether it shrinks in place). Code
// outside the backend's package (device_mesh's group identities, option
// strings and mesh serialization) reads them through the registry by
// backend name (AgreedOptionFields, SetAgreedOptionFields,
// LocalOptionFields, FillLocalOptionDefaults, PrepareThreadFor,
// FillProcessFields, TraitsOf in comm/registry.h) and names none of the
// backend's fields, nor the backend itself.
//
// The typed forms stay the user's: CommOptions holds them (comm/options.h:
// CommOptions::nccl is read by backend "nccl"'s codec); a backend without
// typed options registers an empty codec, which reads as no fields.
//
// Thread-safety: the codec is a value; its functions must be safe to call
// from any thread.
#ifndef DEVMESH_COMM_BACKEND_OPTIONS_H_
#define DEVMESH_COMM_BACKEND_OPTIONS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/option_fields.h"
#include "comm/options.h"
#include "store/store.h"

namespace devmesh {

// Makes rank `rank` of a `size`-rank group whose ranks rendezvous through
// `store`. Called by every rank of the group. What a backend registers
// beside its option codec (comm/registry.h).
using CommunicatorFactory =
    std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
        std::shared_ptr<Store> store, int rank, int size,
        const CommOptions& options)>;

// What the process knows of its place that a backend's defaults may use.
struct LocalPlace {
  // This process's rank among the processes of its host (LOCAL_RANK).
  int local_rank = 0;
  // The local address through which this process reaches the store (an IP
  // literal; device_mesh passes PeerFacingAddress, device_mesh/
  // peer_address.h); empty when not known. A backend that listens for its
  // peers may advertise it (Gloo: GlooOptions::store_route_address).
  std::string store_route_address;
};

// What a backend says of its groups, for the code that makes and keeps
// them (device_mesh) to ask instead of comparing backend names. Every
// member's default is what a backend that says nothing gets.
struct BackendTraits {
  // Device types ("cuda") whose meshes use this backend when they name
  // none. ("cpu" is comm/auto_group.h's "auto", no backend's.)
  std::vector<std::string> default_for_device_types;
  // The backend compares no calls across members itself: its groups are
  // verified (comm/verified_communicator.h) unless the caller says no
  // (Gloo).
  bool verify_calls_by_default = false;
  // The backend compares every call across members in band, as part of
  // the call: a group of it is never wrapped for verification, even when
  // asked (shared memory).
  bool checks_calls_in_band = false;
  // Its communicators are ShrinkableCommunicators
  // (comm/shrinkable_communicator.h): a group that loses members may be
  // shrunk in place rather than made anew (NCCL's ncclCommShrink).
  bool shrinks_in_place = false;
};

// How a backend's options look from outside the backend. Every member may
// be left empty: the backend then has no such fields or no such step.
struct BackendOptionsCodec {
  // The fields every member of a group must agree on, read from the
  // backend's typed options in `options`, in a fixed order with fixed names
  // and kinds. The order is part of devmesh's mesh serialization: a backend
  // appends new fields at the end.
  std::function<std::vector<OptionField>(const CommOptions& options)>
      agreed_fields;
  // Sets the backend's agreed fields in `options` from `fields` (in
  // agreed_fields's order, names and kinds); every other field of
  // `options` is left as it was. Errors: InvalidArgument naming the field
  // (another count, name or kind; a value out of range).
  std::function<absl::Status(absl::Span<const OptionField> fields,
                             CommOptions* options)>
      set_agreed_fields;
  // The fields each member sets for itself, as text ("" when none): two uses
  // of one group must give the same.
  std::function<std::string(const CommOptions& options)> local_fields;
  // Fills, in `options`, the defaults that depend on the process's place,
  // for a group of this backend made by this process. Errors: the
  // backend's (NCCL: Unavailable when no GPU is visible).
  std::function<absl::Status(const LocalPlace& place, CommOptions* options)>
      fill_local_defaults;
  // Sets the calling thread up for a mesh whose groups use this backend
  // (NCCL: the local rank's GPU becomes the current device). Errors: the
  // backend's.
  std::function<absl::Status(const LocalPlace& place)> prepare_thread;
  // Fills, in `options`, the fields that carry the process's place to this
  // backend, for every group the process makes whatever backend it is
  // named for ("auto", or shared memory's point-to-point pairs, may end on
  // this backend): FillProcessFields (comm/registry.h) runs this of every
  // registered backend (Gloo: GlooOptions::store_route_address). Cannot
  // fail.
  std::function<void(const LocalPlace& place, CommOptions* options)>
      fill_process_fields;
  // The type of the typed options in CommOptions that this backend reads
  // (NCCL: NcclOptions, CommOptions::nccl); void when none. Code that holds
  // typed options by type finds their backend through it
  // (BackendReadingOptions, comm/registry.h).
  std::type_index typed_options = std::type_index(typeid(void));
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_BACKEND_OPTIONS_H_
