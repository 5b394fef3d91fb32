// devmesh/tests/comm/shm_segments.h
// -----------------------------------------------------------------------------
// Test helper (testonly): the shared-memory segments devmesh left in
// /dev/shm. Segment names are "devmesh-<creator pid>-<random>"; tests run in
// parallel share /dev/shm, so a test judges only segments it can attribute.
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

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_COMM_SHM_SEGMENTS_H_
