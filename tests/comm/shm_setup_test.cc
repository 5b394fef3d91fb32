// devmesh/tests/comm/shm_setup_test.cc
// The set-up (comm/shm/shm_setup.h) when a member's mapping is not the one
// the others see: member 0 runs the real set-up over a channel whose member
// 1 echoes member 0's own records. Member 1 seems to have mapped the
// segment (its report says so) but never wrote its line there, so member 0
// finds its identity wrong. A verdict could not cross such a mapping, so
// member 0 decides alone, at once (every member of such a group finds some
// identity wrong in its own segment): FailedPrecondition naming member 1
// with "shm", the group kept (no shm) with "auto"; nothing left in
// /dev/shm.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/shm/shm_communicator.h"
#include "comm/shm/shm_setup.h"
#include "gtest/gtest.h"
#include "tests/comm/shm_segments.h"

namespace devmesh {
namespace shm_internal {
namespace {

// Member 0 of a two-member group; member 1 (global rank 7) repeats
// whatever member 0 sends.
class EchoChannel final : public SetupChannel {
 public:
  int rank() const override { return 0; }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  absl::Status Broadcast(void*, size_t) override { return absl::OkStatus(); }
  absl::Status AllGather(const void* mine, void* all, size_t bytes) override {
    std::memcpy(all, mine, bytes);
    std::memcpy(static_cast<char*>(all) + bytes, mine, bytes);
    return absl::OkStatus();
  }

 private:
  std::vector<int> ranks_ = {3, 7};
};

TEST(ShmSetupTest, MemberWhoseMappingIsNotSharedFailsAtOnce) {
  for (bool require : {true, false}) {
    EchoChannel channel;
    ShmOptions options;
    options.require = require;
    options.timeout = absl::Seconds(30);
    const absl::Time start = absl::Now();
    auto setup = SetUpSharedMemory(channel, options);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    if (require) {
      ASSERT_FALSE(setup.ok());
      EXPECT_TRUE(absl::IsFailedPrecondition(setup.status())) << setup.status();
      EXPECT_TRUE(absl::StrContains(
          setup.status().message(),
          "shm: global rank 7 cannot share memory with the group's other "
          "members (checked by global rank 3): its identity in the segment "
          "(pid 0) is not the one it announced"))
          << setup.status();
    } else {
      ASSERT_TRUE(setup.ok()) << setup.status();
      EXPECT_FALSE(setup->has_value());  // the group keeps its channel
    }
    EXPECT_TRUE(
        devmesh::testing::SegmentsOf({static_cast<int64_t>(getpid())}).empty());
  }
}

}  // namespace
}  // namespace shm_internal
}  // namespace devmesh
