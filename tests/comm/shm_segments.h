// devmesh/tests/comm/shm_segments.h
// -----------------------------------------------------------------------------
// Test helper (testonly): the shared-memory segments devmesh left in
// /dev/shm. Segment names carry their creator's pid (comm/shm/shm_names.h);
// tests run in parallel share /dev/shm, so a test judges only segments it can
// attribute.
#ifndef DEVMESH_TESTS_COMM_SHM_SEGMENTS_H_
#define DEVMESH_TESTS_COMM_SHM_SEGMENTS_H_

#include <cstdint>
#include <set>
#include <string>

namespace devmesh {
namespace testing {

// Names under /dev/shm made by one of `pids`.
std::set<std::string> SegmentsOf(const std::set<int64_t>& pids);

// Names under /dev/shm whose creator is no longer alive: leaked (a creator
// unlinks its segment during set-up, before any member can return).
std::set<std::string> LeakedSegments();

// Every devmesh name under /dev/shm, whoever made it.
std::set<std::string> AllSegments();

// The leaked segments (LeakedSegments) that are not in `before`, a listing
// of AllSegments taken earlier: what a test left behind. A stale segment
// that was there before is never counted, even when its creator's pid was
// since reused by a live process and then freed again (a comparison of two
// LeakedSegments listings would count it).
std::set<std::string> NewLeakedSegments(const std::set<std::string>& before);

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_COMM_SHM_SEGMENTS_H_
