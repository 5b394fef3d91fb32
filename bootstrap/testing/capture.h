// devmesh/bootstrap/testing/capture.h
// -----------------------------------------------------------------------------
// Capture (tests only): a temporary file to hand a launcher as its stdout or
// stderr (LaunchOptions::stdout_fd / stderr_fd) and read back afterwards.
//
//   Capture out;
//   options.stdout_fd = out.fd();
//   ... LaunchLocal(options) ...
//   EXPECT_TRUE(absl::StrContains(out.Read(), "[rank 0] ..."));
//
// Thread-safety: one thread at a time.
#ifndef DEVMESH_BOOTSTRAP_TESTING_CAPTURE_H_
#define DEVMESH_BOOTSTRAP_TESTING_CAPTURE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <stdio.h>
#include <unistd.h>

#include <string>

namespace devmesh {
namespace testing {

class Capture {
 public:
  Capture() : file_(tmpfile()) {}
  ~Capture() { fclose(file_); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  int fd() const { return fileno(file_); }
  // Everything written to fd() so far.
  std::string Read() {
    fflush(file_);
    std::string out;
    char buf[4096];
    lseek(fd(), 0, SEEK_SET);
    ssize_t n;
    while ((n = read(fd(), buf, sizeof(buf))) > 0) out.append(buf, n);
    return out;
  }

 private:
  FILE* file_;
};

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_BOOTSTRAP_TESTING_CAPTURE_H_
