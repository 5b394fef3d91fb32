// Set and Get round trips per second, one thread, against a running etcd
// (EtcdStore) and a running devmesh store (TcpStoreClient, //store:server):
//
//   bazel run -c opt //tests/store:etcd_store_bench --
//       --etcd=127.0.0.1:2379 --tcp=127.0.0.1:29500 --ops=2000
// (one line)
//
// Either flag may be left out. Prints one table: store, op, ops/s, mean us.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/etcd_store.h"
#include "store/tcp_store_client.h"

ABSL_FLAG(std::string, etcd, "", "etcd client endpoint host:port");
ABSL_FLAG(std::string, tcp, "", "devmesh store server host:port");
ABSL_FLAG(int, ops, 2000, "round trips per op");
ABSL_FLAG(int, value_bytes, 64, "value size");

namespace devmesh {
namespace {

int Run(const char* name, Store& store) {
  const int ops = absl::GetFlag(FLAGS_ops);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  for (const char* op : {"Set", "Get"}) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < ops; ++i) {
      const std::string key = absl::StrCat("bench/", i % 100);
      absl::Status st =
          op[0] == 'S' ? store.Set(key, value) : store.Get(key).status();
      if (!st.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", name, op, st.ToString().c_str());
        return 1;
      }
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    std::printf("%-6s %-4s %9.0f %9.1f\n", name, op, ops / seconds,
                seconds * 1e6 / ops);
  }
  return 0;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("%-6s %-4s %9s %9s\n", "store", "op", "ops/s", "mean_us");
  int rc = 0;
  if (const std::string etcd = absl::GetFlag(FLAGS_etcd); !etcd.empty()) {
    devmesh::EtcdStoreOptions options;
    options.endpoints = {etcd};
    options.key_prefix = "/devmesh-bench/";
    auto store = devmesh::EtcdStore::Connect(options);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
    rc |= devmesh::Run("etcd", **store);
  }
  if (const std::string tcp = absl::GetFlag(FLAGS_tcp); !tcp.empty()) {
    devmesh::TcpStoreClientOptions options;
    const size_t colon = tcp.rfind(':');
    options.host = tcp.substr(0, colon);
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(tcp.substr(colon + 1), &options.port)) {
      std::fprintf(stderr, "--tcp: want host:port\n");
      return 2;
    }
    auto store = devmesh::TcpStoreClient::Connect(options);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
    rc |= devmesh::Run("tcp", **store);
  }
  return rc;
}
