// Runs docs/guides/store.md's "Bring your own store" sample (RunOnOwnStore)
// as a user would: this process starts a TcpStoreServer on a free loopback
// port, then 4 ranks of itself with //bootstrap's LaunchLocal; each rank
// makes its own store client and runtime from it and prints one line. Passes
// when the four lines are exactly the expected sums and groups, every rank
// exited 0, and the server served the ranks and holds their keys.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bootstrap/launcher.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

absl::StatusOr<std::string> RunOnOwnStore(const std::string& host, int port,
                                          const std::string& job, int rank,
                                          int world_size);  // store.md

namespace {

int IntEnv(const char* name) {
  const char* v = std::getenv(name);
  int out = -1;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : -1;
}

// One rank: RANK and WORLD_SIZE from the launcher, the store's port from the
// test.
int RunRank() {
  auto line = RunOnOwnStore("127.0.0.1", IntEnv("OWN_STORE_PORT"), "job1",
                            IntEnv("RANK"), IntEnv("WORLD_SIZE"));
  if (!line.ok()) {
    std::fprintf(stderr, "own_store: %s\n", line.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", line->c_str());
  std::fflush(stdout);
  return 0;
}

int Fail(const std::string& why) {
  std::printf("own_store_test: FAIL: %s\n0 passed, 1 failed\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("OWN_STORE_PORT") != nullptr) return RunRank();

  devmesh::TcpStoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  auto server = devmesh::TcpStoreServer::Start(server_options);
  if (!server.ok()) return Fail(server.status().ToString());
  const int port = (*server)->port();

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string out_path =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/own_store_ranks.out");
  const int fd = open(out_path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return Fail("cannot open " + out_path);

  devmesh::LaunchOptions launch;
  launch.nproc = 4;
  launch.argv = {"/proc/self/exe"};
  for (int i = 1; i < argc; ++i) launch.argv.push_back(argv[i]);
  launch.env = {{"OWN_STORE_PORT", std::to_string(port)}};
  launch.stdout_fd = fd;
  auto code = devmesh::LaunchLocal(launch);
  close(fd);

  std::ifstream in(out_path);
  std::stringstream text;
  text << in.rdbuf();
  std::printf("the ranks printed:\n%s", text.str().c_str());
  if (!code.ok()) return Fail(code.status().ToString());
  if (*code != 0) return Fail(absl::StrCat("the ranks exited with ", *code));

  const std::vector<std::string> want = {
      "[rank 0] rank 0: tp sum 1, dp [0, 2]",
      "[rank 1] rank 1: tp sum 1, dp [1, 3]",
      "[rank 2] rank 2: tp sum 5, dp [0, 2]",
      "[rank 3] rank 3: tp sum 5, dp [1, 3]",
  };
  std::vector<std::string> lines;
  for (std::string l; std::getline(text, l);) lines.push_back(l);
  for (const std::string& w : want) {
    int seen = 0;
    for (const std::string& l : lines) seen += (l == w);
    if (seen != 1) return Fail(absl::StrCat("want the line '", w, "' once"));
  }
  if (lines.size() != want.size()) {
    return Fail(absl::StrCat("want 4 lines, got ", lines.size()));
  }

  const devmesh::TcpStoreServerStats stats = (*server)->stats();
  if (stats.connections < 4) {
    return Fail(absl::StrCat("the server saw ", stats.connections,
                             " connections, want at least 4"));
  }
  devmesh::TcpStoreClientOptions client_options;
  client_options.port = port;
  auto client = devmesh::TcpStoreClient::Connect(client_options);
  if (!client.ok()) return Fail(client.status().ToString());
  auto keys = (*client)->NumKeys();
  if (!keys.ok() || *keys <= 0) return Fail("the server holds no keys");
  std::printf("own_store_test: 4 exact lines; the server served %lld "
              "connections and holds %lld keys\n1 passed, 0 failed\n",
              static_cast<long long>(stats.connections),
              static_cast<long long>(*keys));
  return 0;
}
