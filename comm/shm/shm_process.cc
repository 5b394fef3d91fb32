// devmesh/comm/shm/shm_process.cc
#include "comm/shm/shm_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace devmesh {
namespace shm_internal {
namespace {

struct StatFields {
  char state = '?';
  uint64_t start_time = 0;
};

// Reads /proc/<path>/stat. errno-style result: 0, or the errno of open/read
// (ENOENT: no such process), or EINVAL when the text does not parse.
int ReadStat(const std::string& path, StatFields* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  close(fd);
  if (n < 0) return err == ESRCH ? ENOENT : err;
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // parse after the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return EINVAL;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(close_paren + 1), ' ',
                     absl::SkipEmpty());
  // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
  if (fields.size() < 20 || fields[0].empty()) return EINVAL;
  out->state = fields[0][0];
  if (!absl::SimpleAtoi(fields[19], &out->start_time)) return EINVAL;
  return 0;
}

}  // namespace

absl::StatusOr<ProcessIdentity> SelfIdentity() {
  StatFields f;
  if (int err = ReadStat("/proc/self/stat", &f); err != 0) {
    return absl::InternalError(
        absl::StrCat("reading /proc/self/stat: ", std::strerror(err)));
  }
  return ProcessIdentity{static_cast<int64_t>(getpid()), f.start_time};
}

Liveness CheckLiveness(const ProcessIdentity& id) {
  StatFields f;
  const int err = ReadStat(absl::StrCat("/proc/", id.pid, "/stat"), &f);
  if (err == ENOENT) return Liveness::kDead;
  if (err != 0) return Liveness::kUnknown;
  if (f.start_time != id.start_time) return Liveness::kDead;  // pid reused
  if (f.state == 'Z' || f.state == 'X') return Liveness::kDead;
  return Liveness::kAlive;
}

}  // namespace shm_internal
}  // namespace devmesh
