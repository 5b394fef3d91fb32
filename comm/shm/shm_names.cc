// devmesh/comm/shm/shm_names.cc
#include "comm/shm/shm_names.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "status/status_macros.h"

namespace devmesh {
namespace shm_internal {
namespace {

constexpr absl::string_view kPrefix = "devmesh-";

// Digits only (SimpleAtoi also takes a sign and spaces).
bool ParseDigits(absl::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, out);
}

}  // namespace

absl::StatusOr<uint64_t> OwnPidNamespace() {
  char link[64];
  const ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  if (n < 0) {
    return absl::InternalError(
        absl::StrCat("reading /proc/self/ns/pid: ", std::strerror(errno)));
  }
  absl::string_view text(link, static_cast<size_t>(n));
  uint64_t inode = 0;
  if (!absl::ConsumePrefix(&text, "pid:[") ||
      !absl::ConsumeSuffix(&text, "]") || !ParseDigits(text, &inode)) {
    return absl::InternalError(absl::StrCat("/proc/self/ns/pid reads '",
                                            absl::string_view(link, n),
                                            "', not pid:[N]"));
  }
  return inode;
}

std::string SegmentName(const SegmentMaker& maker, uint64_t random) {
  // Each part is printed whole; identities too long for the offer's buffer
  // (kMaxSegmentNameLength) get an unswept name instead.
  std::string name = absl::StrCat(
      "/", kPrefix, maker.pid_namespace, "-", maker.process.pid, "-",
      maker.process.start_time, "-", absl::Hex(random, absl::kZeroPad16));
  return name.size() > kMaxSegmentNameLength ? UnsweptSegmentName(random)
                                             : name;
}

std::string UnsweptSegmentName(uint64_t random) {
  return absl::StrCat("/", kPrefix, "x-", absl::Hex(random, absl::kZeroPad16));
}

std::optional<SegmentMaker> ParseSegmentName(absl::string_view name) {
  absl::ConsumePrefix(&name, "/");
  if (!absl::ConsumePrefix(&name, kPrefix)) return std::nullopt;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  if (parts.size() != 4 || parts[3].size() != 16) return std::nullopt;
  for (char c : parts[3]) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (!hex) return std::nullopt;
  }
  SegmentMaker maker;
  uint64_t pid = 0;
  if (!ParseDigits(parts[0], &maker.pid_namespace) ||
      !ParseDigits(parts[1], &pid) ||
      !ParseDigits(parts[2], &maker.process.start_time) || pid == 0 ||
      pid > static_cast<uint64_t>(INT32_MAX)) {
    return std::nullopt;
  }
  maker.process.pid = static_cast<int64_t>(pid);
  return maker;
}

absl::StatusOr<int> RemoveStaleSegments(int64_t only_pid,
                                        const std::string& directory) {
  DEVMESH_ASSIGN_OR_RETURN(const uint64_t own, OwnPidNamespace());
  // /proc must be this pid namespace's (not so after `unshare -p` without
  // a new /proc mount): else its pids are not the names' pids, and nothing
  // is judged.
  char self[32];
  const ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);
  if (n <= 0 || absl::string_view(self, static_cast<size_t>(n)) !=
                    absl::StrCat(getpid())) {
    return 0;
  }
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) {
    return absl::InternalError(
        absl::StrCat("listing ", directory, ": ", std::strerror(errno)));
  }
  std::vector<std::string> stale;
  while (struct dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (!absl::StartsWith(name, kPrefix)) continue;
    std::optional<SegmentMaker> maker = ParseSegmentName(name);
    if (!maker.has_value() || maker->pid_namespace != own) continue;
    if (only_pid > 0 && maker->process.pid != only_pid) continue;
    if (CheckLiveness(maker->process) != Liveness::kDead) continue;
    stale.emplace_back(name);
  }
  closedir(dir);
  int removed = 0;
  for (const std::string& name : stale) {
    // unlink on the mount's path is shm_unlink's effect, and works for a
    // directory given by a test as well.
    if (unlink(absl::StrCat(directory, "/", name).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace shm_internal
}  // namespace devmesh
