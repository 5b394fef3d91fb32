// devmesh/comm/error_info.cc
// The payloads of comm/error_info.h.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "comm/error_info.h"

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

absl::Status WithPeer(absl::Status error, int global_rank) {
  return WithRankPayload(std::move(error), kPeerPayload, global_rank);
}

int PeerRank(const absl::Status& error) {
  const int peer = RankPayload(error, kPeerPayload);
  return peer >= 0 ? peer : ProcessGoneRank(error);
}

absl::Status WithPeerLeft(absl::Status error, int global_rank) {
  return WithRankPayload(WithPeer(std::move(error), global_rank),
                         kPeerLeftPayload, global_rank);
}

int PeerLeftRank(const absl::Status& error) {
  return RankPayload(error, kPeerLeftPayload);
}

absl::Status WithPayloadsOf(absl::Status out, const absl::Status& from) {
  if (out.ok()) return out;
  from.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) {
    if (!out.GetPayload(url).has_value()) out.SetPayload(url, payload);
  });
  return out;
}

absl::Status Reworded(const absl::Status& error, absl::string_view message) {
  return WithPayloadsOf(absl::Status(error.code(), message), error);
}

absl::Status WithFenced(absl::Status error, int global_rank) {
  return WithRankPayload(std::move(error), kFencedPayload, global_rank);
}

absl::Status WithRemoved(absl::Status error, int64_t epoch) {
  if (!error.ok()) {
    error.SetPayload(kRemovedPayload, absl::Cord(std::to_string(epoch)));
  }
  return error;
}

ErrorInfo GetErrorInfo(const absl::Status& error) {
  ErrorInfo info;
  if (error.ok()) return info;
  info.peer = PeerRank(error);
  info.process_gone = ProcessGoneRank(error) >= 0;
  info.peer_left = PeerLeftRank(error) >= 0;
  info.disagreeing = DisagreeingRank(error);
  info.fenced = RankPayload(error, kFencedPayload) >= 0;
  if (auto v = error.GetPayload(kRemovedPayload); v.has_value()) {
    int64_t epoch = -1;
    if (absl::SimpleAtoi(std::string(*v), &epoch) && epoch >= 1) {
      info.removed_in_epoch = epoch;
    }
  }
  return info;
}

}  // namespace devmesh
