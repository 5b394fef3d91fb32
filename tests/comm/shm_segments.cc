// devmesh/tests/comm/shm_segments.cc
#include "tests/comm/shm_segments.h"

#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace devmesh {
namespace testing {
namespace {

// Every "devmesh-<pid>-..." name with its pid.
std::vector<std::pair<std::string, int64_t>> All() {
  std::vector<std::pair<std::string, int64_t>> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (!absl::StartsWith(e->d_name, "devmesh-")) continue;
    std::vector<std::string> parts = absl::StrSplit(e->d_name, '-');
    int64_t pid = 0;
    if (parts.size() >= 3 && absl::SimpleAtoi(parts[1], &pid)) {
      out.emplace_back(e->d_name, pid);
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
