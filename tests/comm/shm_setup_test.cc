// devmesh/tests/comm/shm_setup_test.cc
// The set-up's last step (comm/shm/shm_setup.h, step 6: the members'
// verdicts meet in the segment) when a member never gets there: member 0
// runs the real set-up over a channel whose member 1 echoes member 0's own
// records. Member 1 seems to have mapped the segment (its report says so)
// but never wrote its line, so member 0 finds its identity wrong and then
// waits for a verdict that never comes: DeadlineExceeded naming member 1's
// global rank at the group's timeout, not before and not much after, and
// nothing left in /dev/shm.
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

TEST(ShmSetupTest, MemberThatNeverChecksIsNamedAtTheTimeout) {
  EchoChannel channel;
  ShmOptions options;
  options.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  auto setup = SetUpSharedMemory(channel, options);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(setup.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(setup.status())) << setup.status();
  EXPECT_TRUE(absl::StrContains(setup.status().message(),
                                "global rank(s) [7] mapped the group's "
                                "segment but did not check it"))
      << setup.status();
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_TRUE(devmesh::testing::SegmentsOf({static_cast<int64_t>(getpid())}).empty());
}

}  // namespace
}  // namespace shm_internal
}  // namespace devmesh
