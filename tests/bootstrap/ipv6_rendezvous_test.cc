// A 2-rank rendezvous over IPv6 loopback: MASTER_ADDR "::1" and "[::1]"
// (Bootstrap::FromEnv; rank 0's server binds dual stack): each form runs
// kRuns launches and prints launches, failures and the slowest end.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/launcher.h"
#include "store/socket.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

constexpr char kWorker[] = "tests/bootstrap/rendezvous_worker";
constexpr int kRuns = 5;

// A port free on the IPv6 loopback right now (the test is exclusive, so
// nothing else takes it before rank 0 binds it).
int FreePort() {
  absl::StatusOr<Socket> s = Socket::Listen("::1", 0);
  if (!s.ok()) return -1;
  absl::StatusOr<int> port = s->LocalPort();
  return port.ok() ? *port : -1;
}

TEST(Ipv6RendezvousTest, TwoRanksWithBareAndBracketedLoopback) {
  for (const char* addr : {"::1", "[::1]"}) {
    int failures = 0;
    absl::Duration slowest;
    for (int run = 0; run < kRuns; ++run) {
      const int port = FreePort();
      ASSERT_GT(port, 0) << "no IPv6 loopback here";
      LaunchOptions options;
      options.nproc = 2;
      options.master_port = port;  // rank 0 binds it itself (dual stack)
      // The launcher sets MASTER_ADDR=127.0.0.1; each rank replaces it.
      options.argv = {"/bin/sh", "-c",
                      absl::StrCat("MASTER_ADDR='", addr, "' exec ", kWorker)};
      FILE* out = tmpfile();
      options.stdout_fd = fileno(out);
      const absl::Time start = absl::Now();
      absl::StatusOr<int> code = LaunchLocal(options);
      slowest = std::max(slowest, absl::Now() - start);
      fflush(out);
      std::string text(4096, '\0');
      text.resize(pread(fileno(out), text.data(), text.size(), 0));
      fclose(out);
      const bool ok = code.ok() && *code == 0 &&
                      text.find("rank 1 of 2 read all 2 keys") != std::string::npos;
      if (!ok) {
        ++failures;
        ADD_FAILURE() << addr << " run " << run << ": "
                      << (code.ok() ? absl::StrCat("exit ", *code)
                                    : code.status().ToString())
                      << "\n" << text;
      }
    }
    std::printf("MASTER_ADDR=%s: %d launches, %d failures, slowest %s\n", addr,
                kRuns, failures, absl::FormatDuration(slowest).c_str());
  }
}

}  // namespace
}  // namespace devmesh
