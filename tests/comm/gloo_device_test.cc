// devmesh/tests/comm/gloo_device_test.cc
// The Gloo device's address (comm/gloo/gloo_device.h): a loopback address
// chosen by devmesh (the store's route, the host name's, or the 127.0.0.1
// fallback) becomes this process's own loopback address
// 127.<1 + pid / 65536>.<pid / 256 % 256>.<pid % 256>, so that the kernel's
// port search for each pair's listening socket is over this process's
// sockets only; an address the user chose (GlooOptions::hostname) is kept;
// and groups over per-process addresses work.
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_device.h"
#include "comm/options.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

std::string OwnLoopback() {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  return absl::StrCat("127.", 1 + (pid >> 16), ".", (pid >> 8) & 0xff, ".",
                      pid & 0xff);
}

TEST(GlooDeviceTest, LoopbackStoreRouteBecomesThisProcessesOwnAddress) {
  GlooOptions options;
  options.store_route_address = "127.0.0.1";
  auto device = gloo_internal::MakeGlooDevice(options);
  ASSERT_TRUE(device.ok()) << device.status();
  const std::string str = (*device)->str();
  EXPECT_TRUE(absl::StrContains(str, OwnLoopback() + "]")) << str;
  EXPECT_FALSE(absl::StrContains(str, "127.0.0.1")) << str;
}

TEST(GlooDeviceTest, AnExplicitHostnameIsKept) {
  GlooOptions options;
  options.hostname = "127.0.0.1";
  auto device = gloo_internal::MakeGlooDevice(options);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(absl::StrContains((*device)->str(), "127.0.0.1]"))
      << (*device)->str();
}

// Four processes, each on its own loopback address, connect and all-reduce.
TEST(GlooDeviceTest, GroupsOverPerProcessAddressesWork) {
  absl::Status status = testing::ForkRanks(
      4, [](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        CommOptions options;
        options.timeout = absl::Seconds(60);
        options.gloo.store_route_address = "127.0.0.1";
        auto comm = CreateCommunicator("gloo", store, rank, size, options);
        if (!comm.ok()) return comm.status();
        std::vector<int64_t> v = {rank + 1};
        absl::Status s = (*comm)->AllReduce(absl::MakeSpan(v), ReduceOp::kSum);
        if (!s.ok()) return s;
        if (v[0] != 10) {
          return absl::InternalError(absl::StrCat("sum ", v[0], ", want 10"));
        }
        auto device = gloo_internal::MakeGlooDevice(options.gloo);
        if (!device.ok()) return device.status();
        if (!absl::StrContains((*device)->str(), OwnLoopback() + "]")) {
          return absl::InternalError("device on " + (*device)->str());
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
