// devmesh/store/barrier.h
// -----------------------------------------------------------------------------
// Barrier over a Store: every rank calls it with the same `name`; it returns
// once all `world_size` ranks have arrived. Two store round trips per rank:
// Add(name + "/arrived", 1); the last arrival sets name + "/done" and returns,
// every other rank Gets name + "/done" (the wait is parked in the server,
// c10d's store-based barrier). A name is single-use: use a fresh one for each
// barrier (Bootstrap::Barrier appends a counter for you).
//
// Errors: InvalidArgument (world_size < 1, rank outside [0, world_size),
// empty name), DeadlineExceeded when not every rank arrives within `timeout`
// (the message says how many had arrived), and the store's errors.
// Thread-safety: as safe as the store.
#ifndef DEVMESH_STORE_BARRIER_H_
#define DEVMESH_STORE_BARRIER_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace devmesh {

absl::Status Barrier(Store& store, std::string name, int rank, int world_size,
                     absl::Duration timeout);

}  // namespace devmesh

#endif  // DEVMESH_STORE_BARRIER_H_
