// devmesh/tests/comm/shm_setup_test.cc
// The set-up (comm/shm/shm_setup.h) when a member's mapping is not the one
// the others see: member 0 runs the real set-up over a channel whose member
// 1 echoes member 0's own records. Member 1 seems to have mapped the
// segment (its report says so) but never wrote its line there, so member 0
// finds its identity wrong. A verdict could not cross such a mapping, so
// member 0 decides alone, at once (every member of such a group finds some
// identity wrong in its own segment): FailedPrecondition naming member 1
// with "shm", the group kept (no shm) with "auto"; nothing left in
// /dev/shm. Two members on two threads of this process: the verdicts meet
// in the segment; a member whose exchange fails after it mapped the segment
// is named by the other at once; the last member to map the segment
// removes its name before the members' next exchange.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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

// Two members on two threads of this process (one pid: every identity
// check passes), meeting in memory; member 1's all-gather can be made to
// fail on member 1 alone, after member 0 got both records.
struct Meeting {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> slots[2];  // per step, per member
  int step_count[2] = {0, 0};
  bool fail_member1_gather = false;
  // Member 1 stays in its exchange after delivering its record (a member
  // that never reaches step 6) until `release`.
  bool hold_member1 = false;
  bool release = false;
  // This process's segments in /dev/shm when member 1 first all-gathers
  // (after it mapped the segment, before member 0's step 4): -1 until then.
  int segments_at_member1_gather = -1;
};

class ThreadChannel final : public SetupChannel {
 public:
  ThreadChannel(Meeting& m, int rank,
                std::function<absl::Status()> cancel = nullptr)
      : m_(m), rank_(rank), cancel_(std::move(cancel)) {}
  absl::Status Cancelled() const override {
    return cancel_ ? cancel_() : absl::OkStatus();
  }
  int rank() const override { return rank_; }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  absl::Status Broadcast(void* data, size_t bytes) override {
    std::string got = Exchange(data, bytes)[0];
    std::memcpy(data, got.data(), bytes);
    return absl::OkStatus();
  }
  absl::Status AllGather(const void* mine, void* all, size_t bytes) override {
    if (rank_ == 1) {
      std::lock_guard<std::mutex> lock(m_.mu);
      if (m_.segments_at_member1_gather < 0) {
        m_.segments_at_member1_gather = static_cast<int>(
            devmesh::testing::SegmentsOf({static_cast<int64_t>(getpid())})
                .size());
      }
    }
    std::vector<std::string> got = Exchange(mine, bytes);
    for (int r = 0; r < 2; ++r) {
      std::memcpy(static_cast<char*>(all) + r * bytes, got[r].data(), bytes);
    }
    if (rank_ == 1 && m_.fail_member1_gather) {
      return absl::UnavailableError("member 1's exchange failed (test)");
    }
    if (rank_ == 1 && m_.hold_member1) {
      std::unique_lock<std::mutex> lock(m_.mu);
      m_.cv.wait(lock, [&] { return m_.release; });
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> Exchange(const void* mine, size_t bytes) {
    std::unique_lock<std::mutex> lock(m_.mu);
    const int step = m_.step_count[rank_]++;
    if (static_cast<int>(m_.slots[0].size()) <= step) {
      m_.slots[0].resize(step + 1);
      m_.slots[1].resize(step + 1);
    }
    m_.slots[rank_][step].assign(static_cast<const char*>(mine), bytes);
    m_.cv.notify_all();
    m_.cv.wait(lock, [&] {
      return !m_.slots[0][step].empty() && !m_.slots[1][step].empty();
    });
    return {m_.slots[0][step], m_.slots[1][step]};
  }
  Meeting& m_;
  const int rank_;
  const std::function<absl::Status()> cancel_;
  std::vector<int> ranks_ = {3, 7};
};

TEST(ShmSetupTest, TwoMembersAgreeInTheSegment) {
  Meeting meeting;
  absl::StatusOr<std::optional<ShmSetup>> got[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ThreadChannel channel(meeting, r);
      ShmOptions options;
      options.require = true;
      got[r] = SetUpSharedMemory(channel, options);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(got[r].ok()) << got[r].status();
    ASSERT_TRUE(got[r]->has_value());
    EXPECT_NE((*got[r])->segment, nullptr);
  }
  EXPECT_EQ((*got[0])->single_copy, (*got[1])->single_copy);
  // Member 1, the last to map, removed the name before its first exchange:
  // member 0 was still waiting for that exchange, before its own unlink.
  EXPECT_EQ(meeting.segments_at_member1_gather, 0);
  EXPECT_TRUE(
      devmesh::testing::SegmentsOf({static_cast<int64_t>(getpid())}).empty());
}

// Member 1 maps the segment, then its exchange fails: member 0, waiting in
// step 6, fails at once naming it (not at its 30 s timeout).
TEST(ShmSetupTest, MemberThatGivesUpAfterMappingIsNamedAtOnce) {
  Meeting meeting;
  meeting.fail_member1_gather = true;
  absl::StatusOr<std::optional<ShmSetup>> got[2];
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ThreadChannel channel(meeting, r);
      ShmOptions options;
      options.timeout = absl::Seconds(30);
      got[r] = SetUpSharedMemory(channel, options);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_FALSE(got[1].ok());
  EXPECT_EQ(got[1].status().message(), "member 1's exchange failed (test)");
  ASSERT_FALSE(got[0].ok());
  EXPECT_TRUE(absl::IsUnavailable(got[0].status())) << got[0].status();
  EXPECT_EQ(got[0].status().message(),
            "shm set-up (global rank 3): global rank 7 gave up the set-up "
            "(its exchange over the group or the store failed)");
  EXPECT_TRUE(
      devmesh::testing::SegmentsOf({static_cast<int64_t>(getpid())}).empty());
}

// Member 1 delivers its records but never reaches step 6 (as a member
// that died there, or one this member cannot see): member 0's wait for its
// verdict ends at the channel's first Cancelled() error, with that error's
// code, not at the 30 s timeout.
TEST(ShmSetupTest, WaitForVerdictsEndsWhenCancelled) {
  Meeting meeting;
  meeting.hold_member1 = true;
  const absl::Time start = absl::Now();
  std::atomic<int> asked{0};
  auto cancel = [&]() -> absl::Status {
    ++asked;
    if (absl::Now() - start < absl::Milliseconds(300)) return absl::OkStatus();
    return absl::UnavailableError("the job has a verdict (test)");
  };
  absl::StatusOr<std::optional<ShmSetup>> got[2];
  std::thread member1([&] {
    ThreadChannel channel(meeting, 1);
    ShmOptions options;
    options.timeout = absl::Seconds(30);
    got[1] = SetUpSharedMemory(channel, options);
  });
  {
    ThreadChannel channel(meeting, 0, cancel);
    ShmOptions options;
    options.timeout = absl::Seconds(30);
    got[0] = SetUpSharedMemory(channel, options);
  }
  const absl::Duration took = absl::Now() - start;
  {
    std::lock_guard<std::mutex> lock(meeting.mu);
    meeting.release = true;
  }
  meeting.cv.notify_all();
  member1.join();
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_GE(asked.load(), 2);
  ASSERT_FALSE(got[0].ok());
  EXPECT_TRUE(absl::IsUnavailable(got[0].status())) << got[0].status();
  EXPECT_EQ(got[0].status().message(),
            "shm set-up (global rank 3): stopped waiting for the verdicts of "
            "global rank(s) [7]: the job has a verdict (test)");
  EXPECT_TRUE(
      devmesh::testing::SegmentsOf({static_cast<int64_t>(getpid())}).empty());
}

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
