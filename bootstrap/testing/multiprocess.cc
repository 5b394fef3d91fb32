#include "bootstrap/testing/multiprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/socket.h"

namespace devmesh {
namespace testing {
namespace {

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

[[noreturn]] void RunChild(int rank, int nproc, int port, int report_fd,
                           const std::function<absl::Status(Bootstrap&)>& body,
                           const RunRanksOptions& options, bool hosts_store) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  RendezvousInfo info;
  info.rank = rank;
  info.world_size = nproc;
  info.local_rank = rank;
  info.local_world_size = nproc;
  info.store_host = "127.0.0.1";
  info.store_port = port;
  info.source = "testing";
  BootstrapOptions boot_options;
  boot_options.host_server = hosts_store;
  boot_options.timeout = options.bootstrap_timeout;
  boot_options.token = options.token;
  absl::Status status;
  if (!options.store_address.empty()) {
    status = UseStoreAddress(options.store_address, info);
    boot_options.host_server = false;
  }
  if (status.ok()) {
    absl::StatusOr<std::unique_ptr<Bootstrap>> boot =
        Bootstrap::Create(info, boot_options);
    status = boot.ok() ? body(**boot) : boot.status();
  }
  // Report: one code byte, then the message.
  std::string report(1, static_cast<char>(status.code()));
  report.append(status.message().data(), status.message().size());
  WriteAll(report_fd, report);
  if (!status.ok()) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, status.ToString().c_str());
  }
  std::fflush(nullptr);
  _exit(status.ok() ? 0 : 1);
}

struct Child {
  pid_t pid = -1;
  int report_fd = -1;
  std::string report;
  bool exited = false;
  int wait_status = 0;
};

}  // namespace

std::vector<RankOutcome> RunRanksDetailed(
    int nproc, const std::function<absl::Status(Bootstrap&)>& body,
    const RunRanksOptions& options) {
  std::vector<RankOutcome> outcomes;
  auto fail_all = [&](const absl::Status& s) {
    outcomes.clear();
    for (int r = 0; r < std::max(nproc, 1); ++r) outcomes.push_back({r, s});
    return outcomes;
  };
  if (nproc < 1) {
    return fail_all(absl::InvalidArgumentError(
        absl::StrCat("RunRanks: nproc ", nproc, " is not positive")));
  }
  absl::StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  if (!listener.ok()) return fail_all(listener.status());
  absl::StatusOr<int> port = listener->LocalPort();
  if (!port.ok()) return fail_all(port.status());
  std::fflush(nullptr);  // children must not replay buffered parent output
  std::vector<Child> children(nproc);
  for (int r = 0; r < nproc; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return fail_all(absl::InternalError(absl::StrCat("pipe: ", strerror(errno))));
    }
    pid_t pid = fork();
    if (pid < 0) {
      return fail_all(absl::InternalError(absl::StrCat("fork: ", strerror(errno))));
    }
    if (pid == 0) {
      close(fds[0]);
      const bool hosts_store = options.rank0_hosts_store && r == 0;
      if (hosts_store) {
        // Bootstrap takes a handed listening socket from this variable.
        setenv("DEVMESH_STORE_LISTEN_FD",
               absl::StrCat(listener->Release()).c_str(), 1);
      } else {
        listener->Close();
      }
      RunChild(r, nproc, *port, fds[1], body, options, hosts_store);
    }
    close(fds[1]);
    children[r].pid = pid;
    children[r].report_fd = fds[0];
  }
  TcpStoreServerOptions server_options;
  server_options.token = options.token;
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      std::unique_ptr<TcpStoreServer>();
  if (options.rank0_hosts_store) {
    listener->Close();  // rank 0 listens on it now
  } else {
    server = TcpStoreServer::StartOnFd(listener->Release(), server_options);
  }
  if (!server.ok()) {
    for (Child& c : children) kill(c.pid, SIGKILL);
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  bool timed_out = false;
  int left = nproc;
  while (left > 0) {
    std::vector<pollfd> fds;
    std::vector<Child*> who;
    for (Child& c : children) {
      if (c.report_fd < 0) continue;
      fds.push_back({c.report_fd, POLLIN, 0});
      who.push_back(&c);
    }
    poll(fds.data(), fds.size(), 20);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = read(who[i]->report_fd, buf, sizeof(buf));
      if (got > 0) {
        who[i]->report.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(who[i]->report_fd);
        who[i]->report_fd = -1;
      }
    }
    for (Child& c : children) {
      if (!c.exited && waitpid(c.pid, &c.wait_status, WNOHANG) == c.pid) {
        c.exited = true;
        --left;
      }
    }
    if (left > 0 && absl::Now() >= deadline && !timed_out) {
      timed_out = true;
      for (Child& c : children) {
        if (!c.exited) kill(c.pid, SIGKILL);
      }
    }
  }
  for (int r = 0; r < nproc; ++r) {
    Child& c = children[r];
    // A child may have written its report and exited between the last poll
    // and its waitpid: drain the pipe (the writer is gone, so EOF comes).
    while (c.report_fd >= 0) {
      char buf[4096];
      ssize_t got = read(c.report_fd, buf, sizeof(buf));
      if (got > 0) {
        c.report.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(c.report_fd);
        c.report_fd = -1;
      }
    }
    absl::Status status;
    if (!server.ok()) {
      status = server.status();
    } else if (WIFSIGNALED(c.wait_status) && timed_out &&
               WTERMSIG(c.wait_status) == SIGKILL && c.report.empty()) {
      status = absl::DeadlineExceededError(absl::StrCat(
          "killed after the RunRanks timeout of ",
          absl::FormatDuration(options.timeout)));
    } else if (WIFSIGNALED(c.wait_status)) {
      status = absl::InternalError(
          absl::StrCat("killed by signal ", WTERMSIG(c.wait_status), " (",
                       strsignal(WTERMSIG(c.wait_status)), ")"));
    } else if (!c.report.empty()) {
      status = absl::Status(static_cast<absl::StatusCode>(c.report[0]),
                            c.report.substr(1));
    } else {
      status = absl::InternalError(absl::StrCat(
          "exited with code ", WEXITSTATUS(c.wait_status),
          " without reporting a status"));
    }
    outcomes.push_back({r, status, !c.report.empty(),
                        WIFEXITED(c.wait_status) ? WEXITSTATUS(c.wait_status)
                                                 : -1});
  }
  return outcomes;
}

absl::Status RunRanks(int nproc,
                      const std::function<absl::Status(Bootstrap&)>& body,
                      absl::Duration timeout) {
  RunRanksOptions options;
  options.timeout = timeout;
  options.bootstrap_timeout = timeout;
  std::vector<RankOutcome> outcomes = RunRanksDetailed(nproc, body, options);
  std::vector<std::string> failures;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (const RankOutcome& o : outcomes) {
    if (o.status.ok()) continue;
    if (code == absl::StatusCode::kOk) code = o.status.code();
    failures.push_back(absl::StrCat("rank ", o.rank, ": ", o.status.ToString()));
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::Status(code, absl::StrCat(failures.size(), " of ", nproc,
                                         " ranks failed: ",
                                         absl::StrJoin(failures, "; ")));
}

}  // namespace testing
}  // namespace devmesh
