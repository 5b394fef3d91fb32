// devmesh/tests/comm/fork_ranks.cc
#include "tests/comm/fork_ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bootstrap/tcp_store_client.h"
#include "bootstrap/tcp_store_server.h"

namespace devmesh {
namespace testing {
namespace {

struct Child {
  pid_t pid = -1;
  int read_fd = -1;
  bool done = false;
  int wait_status = 0;
};

// The child learns the store's port through `port_fd` (the parent starts the
// server only after every fork, so no child inherits a running thread and
// its locks).
[[noreturn]] void RunChild(int rank, int nproc, int port_fd, int write_fd,
                           const RankBody& body) {
  int port = 0;
  ssize_t got = read(port_fd, &port, sizeof(port));
  close(port_fd);
  absl::Status status;
  if (got != sizeof(port) || port <= 0) {
    status = absl::UnavailableError("the parent could not start the store");
  } else {
    TcpStoreClientOptions options;
    options.host = "127.0.0.1";
    options.port = port;
    auto client = TcpStoreClient::Connect(options);
    if (!client.ok()) {
      status = client.status();
    } else {
      std::shared_ptr<Store> store(std::move(*client));
      status = body(rank, nproc, store);
    }
  }
  std::string text = status.ok() ? "OK" : status.ToString();
  if (text.size() > 4000) text.resize(4000);
  ssize_t unused = write(write_fd, text.data(), text.size());
  (void)unused;
  close(write_fd);
  _exit(status.ok() ? 0 : 1);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

}  // namespace

absl::Status ForkRanks(int nproc, const RankBody& body,
                       absl::Duration timeout) {
  std::vector<Child> children(nproc);
  std::vector<int> port_fds(nproc, -1);
  for (int rank = 0; rank < nproc; ++rank) {
    int result_pipe[2], port_pipe[2];
    if (pipe(result_pipe) != 0 || pipe(port_pipe) != 0) {
      return absl::InternalError("pipe failed");
    }
    pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      close(result_pipe[0]);
      close(port_pipe[1]);
      for (int r = 0; r < rank; ++r) {
        close(children[r].read_fd);
        close(port_fds[r]);
      }
      RunChild(rank, nproc, port_pipe[0], result_pipe[1], body);
    }
    close(result_pipe[1]);
    close(port_pipe[0]);
    children[rank].pid = pid;
    children[rank].read_fd = result_pipe[0];
    port_fds[rank] = port_pipe[1];
  }
  TcpStoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  auto server = TcpStoreServer::Start(server_options);
  const int port = server.ok() ? (*server)->port() : 0;
  for (int fd : port_fds) {
    ssize_t unused = write(fd, &port, sizeof(port));
    (void)unused;
    close(fd);
  }
  const absl::Time deadline = absl::Now() + timeout;
  int remaining = nproc;
  while (remaining > 0 && absl::Now() < deadline) {
    for (Child& child : children) {
      if (child.done) continue;
      if (waitpid(child.pid, &child.wait_status, WNOHANG) == child.pid) {
        child.done = true;
        --remaining;
      }
    }
    if (remaining > 0) absl::SleepFor(absl::Milliseconds(5));
  }
  std::vector<std::string> errors;
  for (int rank = 0; rank < nproc; ++rank) {
    Child& child = children[rank];
    if (!child.done) {
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &child.wait_status, 0);
      errors.push_back(absl::StrCat("rank ", rank, ": still running after ",
                                    absl::FormatDuration(timeout),
                                    ", killed"));
      close(child.read_fd);
      continue;
    }
    std::string text = ReadAll(child.read_fd);
    close(child.read_fd);
    const int ws = child.wait_status;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) continue;
    if (WIFSIGNALED(ws)) {
      errors.push_back(
          absl::StrCat("rank ", rank, ": killed by signal ", WTERMSIG(ws)));
    } else {
      errors.push_back(absl::StrCat("rank ", rank, ": ",
                                    text.empty() ? "exited non-zero" : text));
    }
  }
  if (errors.empty()) return absl::OkStatus();
  const bool timed_out = remaining > 0;
  std::string message = absl::StrJoin(errors, "\n");
  return timed_out ? absl::DeadlineExceededError(message)
                   : absl::UnknownError(message);
}

}  // namespace testing
}  // namespace devmesh
