// devmesh/comm/process_gone.cc
// The kProcessGonePayload helpers of comm/communicator.h.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "comm/communicator.h"

namespace devmesh {

absl::Status WithProcessGone(absl::Status error, int global_rank) {
  if (!error.ok()) {
    error.SetPayload(kProcessGonePayload,
                     absl::Cord(std::to_string(global_rank)));
  }
  return error;
}

int ProcessGoneRank(const absl::Status& error) {
  auto value = error.GetPayload(kProcessGonePayload);
  int rank = -1;
  if (!value.has_value() || !absl::SimpleAtoi(std::string(*value), &rank) ||
      rank < 0) {
    return -1;
  }
  return rank;
}

}  // namespace devmesh
