// devmesh/tests/comm/process_gone_test.cc
// The rank payloads of comm/communicator.h (process gone, peer, peer left,
// disagreement): set on an error, read back; absent, on OK, or not a rank:
// -1; Reworded keeps them.
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

TEST(PeerPayloadTest, PeerLeftAndTheGoneProcessAsAPeer) {
  const absl::Status peer = WithPeer(absl::UnavailableError("x"), 5);
  EXPECT_EQ(PeerRank(peer), 5);
  EXPECT_EQ(PeerLeftRank(peer), -1);
  EXPECT_EQ(ProcessGoneRank(peer), -1);
  const absl::Status left = WithPeerLeft(absl::UnavailableError("x"), 7);
  EXPECT_EQ(PeerLeftRank(left), 7);
  EXPECT_EQ(PeerRank(left), 7);
  // A gone process is the error's peer when no other is named.
  const absl::Status gone = WithProcessGone(absl::UnavailableError("x"), 9);
  EXPECT_EQ(PeerRank(gone), 9);
  EXPECT_EQ(PeerRank(WithPeer(gone, 2)), 2);
  EXPECT_EQ(PeerRank(absl::UnavailableError("global rank 4 died")), -1);
  EXPECT_EQ(
      DisagreeingRank(WithDisagreement(absl::InvalidArgumentError("x"), 3)), 3);
}

TEST(PeerPayloadTest, RewordedKeepsCodeAndPayloads) {
  const absl::Status e = WithDisagreement(
      WithPeer(absl::DeadlineExceededError("first words"), 6), 1);
  const absl::Status r = Reworded(e, "other words");
  EXPECT_EQ(r.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.message(), "other words");
  EXPECT_EQ(PeerRank(r), 6);
  EXPECT_EQ(DisagreeingRank(r), 1);
  EXPECT_TRUE(Reworded(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace devmesh
