// devmesh/tests/comm/shm_segments.cc
#include "tests/comm/shm_segments.h"

#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <vector>

#include "absl/strings/match.h"
#include "comm/shm/shm_names.h"

namespace devmesh {
namespace testing {
namespace {

// Every segment name (comm/shm/shm_names.h) with its maker's pid.
std::vector<std::pair<std::string, int64_t>> All() {
  std::vector<std::pair<std::string, int64_t>> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (!absl::StartsWith(e->d_name, "devmesh-")) continue;
    if (auto maker = shm_internal::ParseSegmentName(e->d_name)) {
      out.emplace_back(e->d_name, maker->process.pid);
    }
  }
  closedir(dir);
  return out;
}

}  // namespace

std::set<std::string> SegmentsOf(const std::set<int64_t>& pids) {
  std::set<std::string> out;
  for (const auto& [name, pid] : All()) {
    if (pids.count(pid)) out.insert(name);
  }
  return out;
}

std::set<std::string> LeakedSegments() {
  std::set<std::string> out;
  for (const auto& [name, pid] : All()) {
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      out.insert(name);
    }
  }
  return out;
}

std::set<std::string> AllSegments() {
  std::set<std::string> out;
  for (const auto& [name, pid] : All()) out.insert(name);
  return out;
}

std::set<std::string> NewLeakedSegments(const std::set<std::string>& before) {
  std::set<std::string> out;
  for (const std::string& name : LeakedSegments()) {
    if (before.count(name) == 0) out.insert(name);
  }
  return out;
}

}  // namespace testing
}  // namespace devmesh
