#include "bootstrap/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bootstrap/peer_info.h"
#include "bootstrap/rendezvous.h"
#include "comm/shm/shm_names.h"
#include "status/status_macros.h"
#include "store/socket.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

extern char** environ;

namespace devmesh {
namespace {

// OK when `program` names an executable file: a path when it holds a '/',
// else a name found on PATH (execvp's rule). NotFound / PermissionDenied
// naming it otherwise.
absl::Status CheckExecutable(const std::string& program) {
  auto check = [](const std::string& path) { return access(path.c_str(), X_OK); };
  if (program.find('/') != std::string::npos) {
    if (check(program) == 0) return absl::OkStatus();
    const int err = errno;
    std::string message = absl::StrCat("cannot exec '", program, "': ",
                                       strerror(err));
    return err == EACCES ? absl::PermissionDeniedError(message)
                         : absl::NotFoundError(message);
  }
  const char* path = getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    if (check(absl::StrCat(dir.empty() ? "." : dir, "/", program)) == 0) {
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(
      absl::StrCat("cannot exec '", program, "': not found on PATH"));
}

// The token the ranks will read: DEVMESH_STORE_TOKEN from the launch's extra
// variables, else from the launcher's own environment, else none.
std::string StoreToken(
    const std::vector<std::pair<std::string, std::string>>& env) {
  for (auto it = env.rbegin(); it != env.rend(); ++it) {
    if (it->first == "DEVMESH_STORE_TOKEN") return it->second;
  }
  const char* own = getenv("DEVMESH_STORE_TOKEN");
  return own == nullptr ? "" : own;
}

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// One output stream of one rank: a pipe and its unfinished last line.
struct Stream {
  int fd = -1;  // read end; -1 once at EOF
  int out_fd = 1;
  std::string partial;
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int exit_code = 0;  // valid once !running
  int restarts = 0;   // times started again as a spare
  Stream streams[2];
};

// Copies complete lines of `data` to the rank's output with the prefix.
void Emit(int rank, Stream& s, absl::string_view data, bool flush) {
  s.partial.append(data.data(), data.size());
  size_t start = 0;
  std::string out;
  const std::string prefix = absl::StrCat("[rank ", rank, "] ");
  for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    absl::StrAppend(&out, prefix,
                    absl::string_view(s.partial).substr(start, nl + 1 - start));
  }
  s.partial.erase(0, start);
  if (flush && !s.partial.empty()) {
    absl::StrAppend(&out, prefix, s.partial, "\n");
    s.partial.clear();
  }
  WriteAll(s.out_fd, out);
}

// Builds "NAME=value" entries: the inherited environment with `overrides`.
std::vector<std::string> BuildEnv(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    absl::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == name;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides) env.push_back(absl::StrCat(k, "=", v));
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The CPUs rank r is bound to: the (r mod k)-th of the launcher's k CPUs.
absl::StatusOr<std::vector<int>> BindingCpus(int nproc) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return absl::InternalError(
        absl::StrCat("sched_getaffinity: ", strerror(errno)));
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    return absl::InternalError("sched_getaffinity returned no CPU");
  }
  std::vector<int> per_rank(nproc);
  for (int r = 0; r < nproc; ++r) per_rank[r] = cpus[r % cpus.size()];
  return per_rank;
}

}  // namespace

absl::StatusOr<CpuBind> ParseCpuBind(absl::string_view text) {
  if (text == "none") return CpuBind::kNone;
  if (text == "core") return CpuBind::kCore;
  return absl::InvalidArgumentError(
      absl::StrCat("cpu binding must be none or core, not '", text, "'"));
}

absl::StatusOr<int> LaunchLocal(const LaunchOptions& options) {
  if (options.nproc > kMaxLocalRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nproc ", options.nproc, " is more than ", kMaxLocalRanks,
        " local ranks"));
  }
  if (options.nproc < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("nproc ", options.nproc, " is not positive"));
  }
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("no program to launch (argv is empty)");
  }
  if (options.spare_restarts < 0 ||
      (options.spare_restarts > 0 &&
       !(options.keep_going && options.host_store))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spare_restarts ", options.spare_restarts,
        ": not negative, and above 0 only with keep_going and host_store (a "
        "spare joins a job that goes on, through a store no rank hosts)"));
  }
  int port = options.master_port;
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", port, " is outside 0..65535"));
  }
  // With no port given, the launcher binds a free one and hands the bound
  // socket itself to rank 0 (DEVMESH_STORE_LISTEN_FD, read by Bootstrap), so
  // no other process can take the port between the pick and rank 0's listen.
  // With host_store the launcher serves on that socket itself (bound on
  // every interface when the port was given, as rank 0 would bind it).
  Socket listener;
  if (port == 0 || options.host_store) {
    DEVMESH_ASSIGN_OR_RETURN(
        Socket bound, Socket::Listen(port == 0 ? "127.0.0.1" : "", port));
    DEVMESH_ASSIGN_OR_RETURN(port, bound.LocalPort());
    listener = std::move(bound);
  }
  // A program that cannot run is one clear error, not one per rank.
  DEVMESH_RETURN_IF_ERROR(CheckExecutable(options.argv[0]));
  std::unique_ptr<TcpStoreServer> store;
  if (options.host_store) {
    TcpStoreServerOptions server_options;
    server_options.token = StoreToken(options.env);
    DEVMESH_ASSIGN_OR_RETURN(
        store, TcpStoreServer::StartOnFd(listener.Release(), server_options));
  }
  const int listen_fd = listener.fd();
  const std::string exec_failed =
      absl::StrCat("launcher: cannot exec '", options.argv[0], "'\n");
  const std::string bind_failed = "launcher: cannot bind to its CPU\n";
  const int n = options.nproc;
  std::vector<int> bind_cpu(n, -1);
  if (options.cpu_bind == CpuBind::kCore) {
    DEVMESH_ASSIGN_OR_RETURN(bind_cpu, BindingCpus(n));
  }
  std::vector<Rank> ranks(n);
  // Starts rank r (again, as a spare of the running job, when `spare`).
  auto start = [&](int r, bool spare) -> absl::Status {
    auto overrides = options.env;
    overrides.insert(overrides.end(),
                     {{"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", absl::StrCat(port)},
                      {"RANK", absl::StrCat(r)},
                      {"WORLD_SIZE", absl::StrCat(n)},
                      {"LOCAL_RANK", absl::StrCat(r)},
                      {"LOCAL_WORLD_SIZE", absl::StrCat(n)}});
    if (r == 0 && listen_fd >= 0 && !spare) {
      overrides.push_back({"DEVMESH_STORE_LISTEN_FD", absl::StrCat(listen_fd)});
    }
    if (spare) overrides.push_back({"DEVMESH_SPARE", "1"});
    if (store != nullptr) {
      // Every rank joins the launcher's store (bootstrap/rendezvous.h), as
      // torchrun's workers join its agent's: PyTorch code in a rank joins it
      // as a c10d client instead of binding MASTER_PORT.
      overrides.push_back(
          {kExternalStoreVar, absl::StrCat("127.0.0.1:", port)});
      overrides.push_back({"TORCHELASTIC_USE_AGENT_STORE", "True"});
    }
    std::vector<std::string> env = BuildEnv(overrides);
    std::vector<std::string> args = options.argv;
    std::vector<char*> envp = CStrings(env), argv = CStrings(args);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    }
    cpu_set_t bind_set;
    CPU_ZERO(&bind_set);
    if (bind_cpu[r] >= 0) CPU_SET(bind_cpu[r], &bind_set);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
    if (pid == 0) {  // child: only async-signal-safe calls until exec
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      if (bind_cpu[r] >= 0 &&
          sched_setaffinity(0, sizeof(bind_set), &bind_set) != 0) {
        (void)!write(2, bind_failed.data(), bind_failed.size());
        _exit(127);
      }
      dup2(out[1], 1);
      dup2(err[1], 2);
      if (r == 0 && listen_fd >= 0 && !spare) {
        fcntl(listen_fd, F_SETFD, 0);  // keep
      }
      execvpe(argv[0], argv.data(), envp.data());
      (void)!write(2, exec_failed.data(), exec_failed.size());
      _exit(127);
    }
    setpgid(pid, pid);  // also here, so the group exists before any kill
    close(out[1]);
    close(err[1]);
    ranks[r].pid = pid;
    ranks[r].running = true;
    ranks[r].streams[0] = {out[0], options.stdout_fd, ""};
    ranks[r].streams[1] = {err[0], options.stderr_fd, ""};
    return absl::OkStatus();
  };
  for (int r = 0; r < n; ++r) DEVMESH_RETURN_IF_ERROR(start(r, false));
  listener.Close();  // rank 0 holds its own copy

  // With host_store: a rank's end is reported to the rendezvous in the
  // launcher's store (ReportEndBeforeRendezvous) until it has completed, so
  // that the ranks waiting in it fail at once naming that rank.
  std::unique_ptr<TcpStoreClient> reporter;
  bool rendezvous_settled = store == nullptr;
  auto report_end = [&](int r, const std::string& how) {
    if (rendezvous_settled) return;
    if (reporter == nullptr) {
      TcpStoreClientOptions client_options;
      client_options.port = port;
      client_options.token = StoreToken(options.env);
      client_options.connect_timeout = absl::Seconds(1);
      client_options.default_timeout = absl::Seconds(2);
      absl::StatusOr<std::unique_ptr<TcpStoreClient>> connected =
          TcpStoreClient::Connect(client_options);
      if (!connected.ok()) {
        rendezvous_settled = true;  // the ranks' own timeouts remain
        return;
      }
      reporter = *std::move(connected);
    }
    absl::StatusOr<bool> open = ReportEndBeforeRendezvous(
        *reporter, absl::StrCat("rank ", r, " (pid ", ranks[r].pid, ") ", how));
    if (!open.ok() || !*open) rendezvous_settled = true;
  };

  // Output streams of ranks started again, still draining: (rank, stream).
  std::vector<std::pair<int, Stream>> finished;
  int failed_rank = -1;
  int result = 0;
  absl::Time kill_at = absl::InfiniteFuture();
  bool killed = false;
  int running = n;
  absl::Time all_exited_at = absl::InfiniteFuture();
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, Stream*>> who;  // (rank, stream)
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < 2; ++k) {
        if (ranks[r].streams[k].fd < 0) continue;
        fds.push_back({ranks[r].streams[k].fd, POLLIN, 0});
        who.emplace_back(r, &ranks[r].streams[k]);
      }
    }
    for (auto& [r, st] : finished) {
      if (st.fd < 0) continue;
      fds.push_back({st.fd, POLLIN, 0});
      who.emplace_back(r, &st);
    }
    // Done when every rank has exited and its output is drained (or a
    // descendant keeps a pipe open for over a second).
    if (running == 0 && (fds.empty() || absl::Now() > all_exited_at + absl::Seconds(1))) {
      break;
    }
    poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [r, stream] = who[i];
      Stream& s = *stream;
      char buf[16384];
      ssize_t got = read(s.fd, buf, sizeof(buf));
      if (got > 0) {
        Emit(r, s, absl::string_view(buf, static_cast<size_t>(got)), false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        Emit(r, s, "", true);
        close(s.fd);
        s.fd = -1;
      }
    }
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (!ranks[r].running || waitpid(ranks[r].pid, &status, WNOHANG) <= 0) {
        continue;
      }
      ranks[r].running = false;
      --running;
      // A rank stopped while a group was being set up may leave its
      // segment in /dev/shm (comm/shm/shm_names.h): remove what it made.
      (void)shm_internal::RemoveStaleSegments(ranks[r].pid);
      if (running == 0) all_exited_at = absl::Now();
      const int code =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      ranks[r].exit_code = code;
      report_end(r, WIFEXITED(status)
                        ? absl::StrCat("exited with code ", code)
                        : absl::StrCat("was killed by signal ",
                                       WTERMSIG(status)));
      if (code != 0 && ranks[r].restarts < options.spare_restarts) {
        // Started again as a spare (DEVMESH_SPARE=1): its output so far
        // drains through `finished`, the new process gets new pipes.
        ++ranks[r].restarts;
        for (Stream& st : ranks[r].streams) {
          if (st.fd >= 0) finished.emplace_back(r, st);
          st = Stream{};
        }
        WriteAll(options.stderr_fd,
                 absl::StrCat("[launcher] rank ", r,
                              WIFEXITED(status) ? " exited with code "
                                                : " was killed by signal ",
                              WIFEXITED(status) ? code : WTERMSIG(status),
                              "; starting it again as a spare (restart ",
                              ranks[r].restarts, " of ",
                              options.spare_restarts, ")\n"));
        absl::Status restarted = start(r, true);
        if (!restarted.ok()) {
          WriteAll(options.stderr_fd,
                   absl::StrCat("[launcher] rank ", r, " was not started "
                                "again: ", restarted.ToString(), "\n"));
        } else {
          all_exited_at = absl::InfiniteFuture();
          ++running;
          continue;
        }
      }
      if (code != 0 && (failed_rank < 0 || options.keep_going)) {
        const bool first = failed_rank < 0;
        if (first) {
          failed_rank = r;
          result = code;
        }
        WriteAll(options.stderr_fd,
                 absl::StrCat("[launcher] rank ", r,
                              WIFEXITED(status) ? " exited with code "
                                                : " was killed by signal ",
                              WIFEXITED(status) ? code : WTERMSIG(status),
                              options.keep_going
                                  ? "; the other ranks go on (keep_going)\n"
                                  : "; stopping the other ranks\n"));
        if (!options.keep_going) {
          for (Rank& other : ranks) {
            if (other.running) kill(-other.pid, SIGTERM);
          }
          kill_at = absl::Now() + options.grace_period;
        }
      }
    }
    if (!killed && absl::Now() >= kill_at) {
      killed = true;
      for (Rank& other : ranks) {
        if (other.running) kill(-other.pid, SIGKILL);
      }
    }
  }
  for (Rank& r : ranks) {
    for (Stream& s : r.streams) {
      if (s.fd >= 0) close(s.fd);
    }
  }
  for (auto& [r, s] : finished) {
    if (s.fd >= 0) close(s.fd);
  }
  if (failed_rank >= 0) {
    WriteAll(options.stderr_fd,
             absl::StrCat("[launcher] failed: rank ", failed_rank,
                          " (exit code ", result, ")\n"));
  }
  return result;
}

}  // namespace devmesh
