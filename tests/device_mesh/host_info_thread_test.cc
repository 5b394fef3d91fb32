// MeshRuntime::SetHostInfo while another thread makes groups and reads the
// host table (a Grow sets the grown job's table; a group may be made on
// another thread meanwhile): every reader sees the old table or the new
// one, whole. Meant to be run under TSan too (--config=tsan).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "device_mesh/mesh_runtime.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

TEST(HostInfoThreads, SetHostInfoWhileGroupsAreMade) {
  auto store = std::make_shared<InMemoryStore>();
  // Rank 0 of 2: a group of {0} is a named group (not the world), made
  // through CreateOn, which reads the host table.
  auto runtime = MeshRuntime::Create(store, 0, 2, 0);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  MeshRuntime& rt = **runtime;
  rt.SetHostInfo({"a", "a"}, "127.0.0.1");
  std::atomic<bool> done{false};
  std::atomic<int> sets{0};
  std::thread setter([&] {
    for (int i = 0; !done.load(); ++i) {
      const bool odd = i % 2 == 1;
      rt.SetHostInfo(odd ? std::vector<std::string>{"a", "a"}
                         : std::vector<std::string>{"b", "b"},
                     odd ? "127.0.0.1" : "127.0.0.2");
      sets.fetch_add(1);
    }
  });
  for (int i = 0; i < 40; ++i) {
    auto group = rt.Group("auto", absl::StrCat("host_info_thread_", i), {0},
                          absl::Seconds(10));
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_EQ((*group)->size(), 1);
    const std::vector<std::string> hosts = rt.hostnames();
    ASSERT_EQ(hosts.size(), 2u);
    EXPECT_EQ(hosts[0], hosts[1]);  // never half of each table
    const std::string address = rt.store_route_address();
    EXPECT_TRUE(address == "127.0.0.1" || address == "127.0.0.2") << address;
  }
  done.store(true);
  setter.join();
  EXPECT_GT(sets.load(), 0);
}

}  // namespace
}  // namespace devmesh
