// devmesh/comm/error_info.cc
// The payloads of comm/error_info.h.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "comm/error_info.h"

namespace devmesh {
namespace {

// `error` with the decimal `value` (a global rank, an epoch) at `url`.
absl::Status WithNumberPayload(absl::Status error, absl::string_view url,
                               int64_t value) {
  if (!error.ok()) error.SetPayload(url, absl::Cord(std::to_string(value)));
  return error;
}

// The non-negative number at `url`; -1 when there is none (or not one).
int64_t NumberPayload(const absl::Status& error, absl::string_view url) {
  auto value = error.GetPayload(url);
  int64_t n = -1;
  if (!value.has_value() || !absl::SimpleAtoi(std::string(*value), &n) ||
      n < 0) {
    return -1;
  }
  return n;
}

absl::Status WithRankPayload(absl::Status error, absl::string_view url,
                             int global_rank) {
  return WithNumberPayload(std::move(error), url, global_rank);
}

int RankPayload(const absl::Status& error, absl::string_view url) {
  const int64_t rank = NumberPayload(error, url);
  return rank <= std::numeric_limits<int>::max() ? static_cast<int>(rank) : -1;
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
  return WithNumberPayload(std::move(error), kRemovedPayload, epoch);
}

ErrorInfo GetErrorInfo(const absl::Status& error) {
  ErrorInfo info;
  if (error.ok()) return info;
  info.peer = PeerRank(error);
  info.process_gone = ProcessGoneRank(error) >= 0;
  info.peer_left = PeerLeftRank(error) >= 0;
  info.disagreeing = DisagreeingRank(error);
  info.fenced = RankPayload(error, kFencedPayload) >= 0;
  if (const int64_t epoch = NumberPayload(error, kRemovedPayload);
      epoch >= 1) {
    info.removed_in_epoch = epoch;
  }
  return info;
}

}  // namespace devmesh
