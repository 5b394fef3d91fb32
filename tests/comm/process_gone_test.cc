// devmesh/tests/comm/process_gone_test.cc
// The process-gone payload of comm/communicator.h: set on an error, read
// back; absent, on OK, or not a rank: -1.
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "comm/communicator.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(ProcessGoneTest, RoundTrip) {
  const absl::Status e =
      WithProcessGone(absl::UnavailableError("global rank 12 died"), 12);
  EXPECT_EQ(ProcessGoneRank(e), 12);
  EXPECT_EQ(e.message(), "global rank 12 died");
  EXPECT_TRUE(absl::IsUnavailable(e));
}

TEST(ProcessGoneTest, AbsentOrNotARank) {
  EXPECT_EQ(ProcessGoneRank(absl::UnavailableError("x")), -1);
  EXPECT_EQ(ProcessGoneRank(WithProcessGone(absl::OkStatus(), 3)), -1);
  absl::Status bad = absl::UnavailableError("x");
  bad.SetPayload(kProcessGonePayload, absl::Cord("three"));
  EXPECT_EQ(ProcessGoneRank(bad), -1);
  bad.SetPayload(kProcessGonePayload, absl::Cord("-4"));
  EXPECT_EQ(ProcessGoneRank(bad), -1);
}

}  // namespace
}  // namespace devmesh
