// devmesh/comm/shm/shm_names.h
// -----------------------------------------------------------------------------
// The names of the shared-memory backend's segments, and the removal of
// segments whose maker is gone.
//
// A segment's name says who made it and where:
//
//   /devmesh-<pid namespace>-<pid>-<start time>-<16 hex digits>
//
// the pid namespace being the inode of /proc/self/ns/pid, the start time
// field 22 of /proc/<pid>/stat (shm_process.h), the hex digits random. A name
// lives in /dev/shm only while its group is being set up: the last member to
// map it unlinks it (shm_segment.h). An entry whose maker is gone is left
// over from a set-up that was stopped (a member SIGKILLed, a launcher that
// stopped its ranks) and nothing will ever map it.
//
// RemoveStaleSegments removes such entries: only names of this form, only of
// this process's pid namespace (a pid means nothing in another one), only
// when /proc says that (pid, start time) no longer runs (a pid reused by a
// later process does not keep a stale entry alive, and a live maker's entry
// is never touched), and only when /proc is this pid namespace's (it returns
// 0 otherwise). The shm backend calls it once per process before its
// first segment and again when a set-up fails; `//bootstrap:launch` calls it
// for each rank it reaps.
//
// Thread-safety: every function may be called from any thread.
#ifndef DEVMESH_COMM_SHM_SHM_NAMES_H_
#define DEVMESH_COMM_SHM_SHM_NAMES_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/shm/shm_process.h"

namespace devmesh {
namespace shm_internal {

// Who made a segment, read back from its name.
struct SegmentMaker {
  uint64_t pid_namespace = 0;
  ProcessIdentity process;
};

// The longest name SegmentName makes, without its terminating NUL.
inline constexpr size_t kMaxSegmentNameLength = 63;

// This process's pid namespace: the inode of /proc/self/ns/pid. Errors:
// Internal when the link cannot be read or does not read "pid:[N]".
absl::StatusOr<uint64_t> OwnPidNamespace();

// The name of a new segment made by `maker`, with `random` as its hex part.
// Never longer than kMaxSegmentNameLength.
std::string SegmentName(const SegmentMaker& maker, uint64_t random);

// "/devmesh-x-<16 hex digits>": a name that ParseSegmentName rejects, so no
// sweep ever removes it, for a maker whose pid namespace cannot be read
// (OwnPidNamespace failed) and for identities too long to print.
std::string UnsweptSegmentName(uint64_t random);

// Reads the maker out of a name as SegmentName writes it, with or without
// the leading '/'. nullopt for any other name (another program's, an older
// devmesh's "/devmesh-<pid>-<hex>", a number that overflows).
std::optional<SegmentMaker> ParseSegmentName(absl::string_view name);

// Removes from `directory` (the mount of POSIX shared memory, /dev/shm) every
// segment whose name parses, whose pid namespace is this process's, whose pid
// is `only_pid` when that is positive, and whose maker is dead by
// CheckLiveness (kUnknown keeps the entry). Returns how many it removed.
// Errors: Internal when this process's pid namespace cannot be read or
// `directory` cannot be listed (naming it and errno); an entry that vanishes
// meanwhile is not an error.
absl::StatusOr<int> RemoveStaleSegments(
    int64_t only_pid = 0, const std::string& directory = "/dev/shm");

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_NAMES_H_
