// devmesh/comm/auto_group.h
// -----------------------------------------------------------------------------
// CreateGroupCommunicator: a group of any backend name, including the two
// that choose a transport per group. "auto": shared memory ("shm") when the
// members map one segment, else, across hosts, the two-level group
// (comm/two_level: shm inside each host, the cross-host backend between
// hosts) when the hosts each hold the same number (>= 2) of members and
// DEVMESH_TWO_LEVEL is not 0, else the cross-host backend (config/settings.h's
// CrossHostBackendName: "ucx", or "gloo" where linked and asked for).
// "shm": shared memory, or FailedPrecondition. Any other name: the
// registry's backend of that name (comm/registry.h).
//
// Every member decides alike: it calls this with the same backend,
// member_hosts and settings (DEVMESH_* settings are agreed by a mesh), and
// a member that cannot share the segment makes every member fall through
// together (the set-up's check, never host names alone).
//
// Thread-safety: may be called from any thread, one call per (store,
// group).
#ifndef DEVMESH_COMM_AUTO_GROUP_H_
#define DEVMESH_COMM_AUTO_GROUP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "store/store.h"

namespace devmesh {

// Whether "auto" makes two-level groups when DEVMESH_TWO_LEVEL is unset.
// On: a two-level group's creation is its flat group's (the levels come at
// its first all-reduce, from the flat group, no store round trip;
// docs/two_level.md), and its all-reduce was faster than the flat group's
// at every size measured there.
inline constexpr bool kTwoLevelByDefault = true;

// Makes rank `rank` of a `size`-member group of `backend` over `store`.
// `member_hosts` holds a host key per member in group order (equal keys:
// one host); empty when no member's host is known, in which case "auto"
// tries shared memory first and never goes two-level. An empty key is a
// member whose host is not known while others are: the members are then
// taken as apart, as they are when keys differ (no shared memory for
// "auto"), and never two-level.
// Errors:
//   NotFound          `backend`, or for "auto" across hosts the cross-host
//                     backend, is not linked (CheckBackendLinked's text);
//                     for "auto" this comes before any member waits on
//                     another host's leader
//   FailedPrecondition  "shm" whose members cannot share memory, naming
//                     the member (CreateShmGroup's)
//   others            the chosen backend's (InvalidArgument for bad
//                     rank/size/options, DeadlineExceeded when members do
//                     not come within options.timeout, ...)
absl::StatusOr<std::unique_ptr<Communicator>> CreateGroupCommunicator(
    absl::string_view backend, std::shared_ptr<Store> store, int rank,
    int size, const CommOptions& options,
    absl::Span<const std::string> member_hosts);

// What a caller that makes groups by backend name asks instead of comparing
// names. Each reads only the registry and the process's settings, so every
// member answers alike. Never fail.

// The backend a mesh of `device_type` uses when it names none: "auto" for
// "cpu", else the registered default (RegisteredDefaultBackendFor, "cuda"
// -> "nccl"); "" when there is none.
std::string DefaultGroupBackendFor(absl::string_view device_type);

// The backend a group of `backend` is known to get before it is made: for
// "auto" whose members are known to be on different hosts
// (`members_apart`), the cross-host backend (DEVMESH_CROSS_HOST_BACKEND);
// otherwise `backend` itself ("auto" on one host may still end on either;
// the made group's Communicator::backend() says which).
std::string BackendKnownBeforeCreation(absl::string_view backend,
                                       bool members_apart);

// The backend of a verified group's checker (comm/verified_communicator.h):
// "auto" when the members may share a host (shared memory where they do),
// else the default cross-host backend ("ucx") whatever
// DEVMESH_CROSS_HOST_BACKEND says (its small all-gather costs a round trip,
// where Gloo's runs on its event loop).
std::string CallCheckerBackend(bool members_apart);

// CheckBackendLinked (comm/registry.h) for a group of `backend`: for "auto"
// and "shm" the cross-host backend (for groups and point-to-point pairs
// that cannot share memory), else `backend`. Errors: NotFound as
// CheckBackendLinked.
absl::Status CheckGroupBackendLinked(absl::string_view backend);

// The names a group's backend may be, for an error message: "auto", then
// BackendChoicesText (comm/registry.h): `"auto", "nccl", "shm", "ucx", or
// "gloo" with @devmesh//comm:gloo linked`.
std::string GroupBackendChoicesText();

}  // namespace devmesh

#endif  // DEVMESH_COMM_AUTO_GROUP_H_
