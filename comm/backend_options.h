// devmesh/comm/backend_options.h
// -----------------------------------------------------------------------------
// What a backend registers (comm/registry.h): its CommunicatorFactory and
// a BackendOptionsCodec, its options type-erased: which of its fields every
// member of a group must agree on, how those fields are made back into
// CommOptions, which fields each member sets for itself, and the defaults
// that depend on where the process runs (NCCL's GPU by local rank). Code
// outside the backend's package (device_mesh's group identities, option
// strings and mesh serialization) reads them through the registry by
// backend name (AgreedOptionFields, SetAgreedOptionFields,
// LocalOptionFields, FillLocalOptionDefaults, PrepareThreadFor in
// comm/registry.h) and names none of the backend's fields.
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
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_BACKEND_OPTIONS_H_
