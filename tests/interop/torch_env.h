// tests/interop/torch_env.h
// -----------------------------------------------------------------------------
// What the interop tests need to run real torch: the venv's python (from
// $DEVMESH_TORCH_VENV, default /opt/devmesh/torch-venv, made by
// tools/install_torch.sh), whether its absence must fail the test
// (DEVMESH_REQUIRE_TORCH=1, set by CI) or skip it, and a child process with
// pipes to its stdin/stdout that is killed when the test ends.
//
// Thread-safety: one test thread.
#ifndef DEVMESH_TESTS_INTEROP_TORCH_ENV_H_
#define DEVMESH_TESTS_INTEROP_TORCH_ENV_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace devmesh::interop {

// The venv directory and its python, or the reason they are unusable.
struct TorchVenv {
  std::string dir;
  std::string python;
};
absl::StatusOr<TorchVenv> FindTorchVenv();
// True when DEVMESH_REQUIRE_TORCH is "1": a missing torch fails the test.
bool TorchRequired();

// Skips (or, with DEVMESH_REQUIRE_TORCH=1, fails) the current test when the
// venv is absent; else assigns it to `venv`.
#define DEVMESH_GET_TORCH_OR_SKIP(venv)                                     \
  do {                                                                      \
    auto found_ = ::devmesh::interop::FindTorchVenv();                      \
    if (!found_.ok()) {                                                     \
      if (::devmesh::interop::TorchRequired()) {                            \
        FAIL() << "DEVMESH_REQUIRE_TORCH=1 but " << found_.status();        \
      }                                                                     \
      GTEST_SKIP() << "torch is not installed (" << found_.status()         \
                   << "); run tools/install_torch.sh";                      \
    }                                                                       \
    venv = *std::move(found_);                                              \
  } while (0)

// A child process with its stdin and stdout piped to us (stderr inherited).
class Child {
 public:
  // Starts argv[0] (a path) with `env` added to ours. Errors: Internal.
  static absl::StatusOr<Child> Start(
      const std::vector<std::string>& argv,
      const std::vector<std::pair<std::string, std::string>>& env = {});
  Child(Child&& other) noexcept;
  Child(const Child&) = delete;
  ~Child();  // kills it (SIGKILL) if still running

  // The next line of its stdout without the newline. DeadlineExceeded after
  // `timeout`, Unavailable at EOF.
  absl::StatusOr<std::string> ReadLine(absl::Duration timeout);
  absl::Status WriteLine(const std::string& line);
  void CloseStdin();
  // Its exit code (128 + signal when killed); kills it after `timeout`.
  int Wait(absl::Duration timeout);
  // Everything it printed that ReadLine has not returned, until EOF or
  // `timeout`.
  std::string ReadRest(absl::Duration timeout);

 private:
  Child() = default;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buffered_;
};

}  // namespace devmesh::interop

#endif  // DEVMESH_TESTS_INTEROP_TORCH_ENV_H_
