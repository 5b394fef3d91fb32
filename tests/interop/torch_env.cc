#include "tests/interop/torch_env.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace devmesh::interop {

absl::StatusOr<TorchVenv> FindTorchVenv() {
  const char* env = std::getenv("DEVMESH_TORCH_VENV");
  TorchVenv venv;
  venv.dir = env != nullptr && *env != '\0' ? env : "/opt/devmesh/torch-venv";
  venv.python = venv.dir + "/bin/python";
  if (access(venv.python.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no python at ", venv.python, " (DEVMESH_TORCH_VENV=",
                     env == nullptr ? "unset" : env, ")"));
  }
  return venv;
}

bool TorchRequired() {
  const char* env = std::getenv("DEVMESH_REQUIRE_TORCH");
  return env != nullptr && std::string(env) == "1";
}

absl::StatusOr<Child> Child::Start(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& [k, v] : env) {
      replaced = replaced || std::string(*e).rfind(k + "=", 0) == 0;
    }
    if (!replaced) env_strings.emplace_back(*e);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    setpgid(0, 0);  // its own group, so Wait's kill reaches its children
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  Child c;
  c.pid_ = pid;
  c.in_ = in[1];
  c.out_ = out[0];
  return c;
}

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      in_(std::exchange(o.in_, -1)),
      out_(std::exchange(o.out_, -1)),
      buffered_(std::move(o.buffered_)) {}

Child::~Child() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (in_ >= 0) close(in_);
  if (out_ >= 0) close(out_);
}

absl::StatusOr<std::string> Child::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::DeadlineExceededError("no line from the child");
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(ms)) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_, buf, sizeof(buf));
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("child's stdout ended; unread: ", buffered_));
    }
    buffered_.append(buf, n);
  }
}

std::string Child::ReadRest(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) break;
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(ms)) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_, buf, sizeof(buf));
    if (n <= 0) break;
    buffered_.append(buf, n);
  }
  return std::exchange(buffered_, "");
}

absl::Status Child::WriteLine(const std::string& line) {
  const std::string l = line + "\n";
  if (write(in_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) {
    return absl::UnavailableError("cannot write to the child");
  }
  return absl::OkStatus();
}

void Child::CloseStdin() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

int Child::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (absl::Now() >= deadline) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace devmesh::interop
