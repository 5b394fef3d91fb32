// devmesh/comm/rank_payloads.cc
// The rank payloads of comm/communicator.h: kProcessGonePayload and
// kDisagreementPayload.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "comm/communicator.h"

namespace devmesh {

namespace {

absl::Status WithRankPayload(absl::Status error, absl::string_view url,
                             int global_rank) {
  if (!error.ok()) {
    error.SetPayload(url, absl::Cord(std::to_string(global_rank)));
  }
  return error;
}

int RankPayload(const absl::Status& error, absl::string_view url) {
  auto value = error.GetPayload(url);
  int rank = -1;
  if (!value.has_value() || !absl::SimpleAtoi(std::string(*value), &rank) ||
      rank < 0) {
    return -1;
  }
  return rank;
}

}  // namespace

absl::Status WithProcessGone(absl::Status error, int global_rank) {
  return WithRankPayload(std::move(error), kProcessGonePayload, global_rank);
}

int ProcessGoneRank(const absl::Status& error) {
  return RankPayload(error, kProcessGonePayload);
}

absl::Status WithDisagreement(absl::Status error, int global_rank) {
  return WithRankPayload(std::move(error), kDisagreementPayload, global_rank);
}

int DisagreeingRank(const absl::Status& error) {
  return RankPayload(error, kDisagreementPayload);
}

}  // namespace devmesh
