// devmesh/examples/elastic/elastic_training.h
// -----------------------------------------------------------------------------
// A data-parallel training loop over a 2-d (replica, shard) mesh that survives
// a killed rank with DeviceMesh::Shrink: the worked example, run
// by tests/examples:elastic_training_test and by elastic_training_main.
//
// The model: each rank of a replica holds one shard of kShard parameters
// (floats holding small integers, so every result is exact and checked bit
// for bit). Step s, on the rank at replica coordinate i:
//   1. along the shard dim: all-reduce (sum) of the shard's parameter sum:
//      `total`, the same on every shard of the replica;
//   2. gradient g[j] = ((s + i + j + total) mod 5) + 1 (replica i's data);
//   3. along the replica dim: all-reduce (sum) of g;
//   4. p[j] = (p[j] + g[j]) mod 1000.
// Each collective also moves `pad` zero floats, so that it takes long enough
// to be killed in the middle of.
//
// On a failed step every live rank calls Shrink on the replica dim. The
// survivors agree on the last step every one of them completed (an
// all-reduce of min over the new mesh's dims: a rank is at most one step
// ahead), restore the parameters they kept for it (each keeps the last
// kHistory steps in memory; replicas are identical, so any survivor's copy
// is the replica's), and go on with one replica fewer. The result equals a
// fresh run that used the old replicas up to that step and the new ones
// after (Reference).
#ifndef DEVMESH_EXAMPLES_ELASTIC_ELASTIC_TRAINING_H_
#define DEVMESH_EXAMPLES_ELASTIC_ELASTIC_TRAINING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/error_info.h"
#include "device_mesh/device_mesh.h"

namespace devmesh {
namespace elastic_example {

inline constexpr int kShard = 4;     // parameters per rank
inline constexpr int kHistory = 4;   // steps of parameters kept in memory

struct TrainOptions {
  int64_t steps = 30;
  int64_t pad = 1 << 18;  // extra floats per collective
  std::string replica_dim = "dp";
  std::string shard_dim = "tp";
  ShrinkOptions shrink;
  // Resume from a checkpoint: start at `start_step` with `start_params`
  // (this rank's shard; empty: the initial parameters at step 0).
  int64_t start_step = 0;
  std::vector<float> start_params;
  // The compute phase of step s (a stand-in for the forward and backward
  // passes), before the step's collectives: compute(s) long (none when
  // null). It is cut short when the job learns of a death
  // (DeviceMesh::OnFailure): the step then fails with the verdict and this
  // rank joins the others' Shrink within about a lease period, instead of
  // holding it up until its compute ends (or failing it, past
  // ShrinkOptions::timeout).
  std::function<absl::Duration(int64_t step)> compute;
  // Called after every completed step with the steps done so far and the
  // parameters then (a checkpoint writer, a timer); may be null.
  std::function<void(int64_t done, const std::vector<float>& params)>
      on_step_done;
};

// Where a fault may be injected (the test's hook).
enum class Point { kBeforeShardAllReduce, kBeforeReplicaAllReduce,
                   kShrinkStart };
using Hook = std::function<void(Point, int64_t step, int64_t epoch)>;

// One recovery as this rank saw it.
struct Recovery {
  int64_t failed_step = 0;    // the step whose collective failed here
  int64_t resumed_step = 0;   // the step every survivor completed
  int64_t replicas = 0;       // replicas from then on
  absl::Time failed_at;       // when the failing call returned
  absl::Time resumed_at;      // the first collective of the new epoch done
  // The last Shrink of the recovery (the mesh it resumed on), and every
  // Shrink of it in order: a death during the agreement on the step makes
  // it shrink again.
  ShrinkReport report;
  std::vector<ShrinkReport> shrinks;
  std::string error;          // the failed call's error
};

struct TrainResult {
  std::vector<float> params;  // this rank's shard after the last step
  int64_t steps = 0;          // steps completed
  int64_t shard = 0;          // this rank's shard coordinate
  int64_t shards = 0;
  std::vector<Recovery> recoveries;
  // Set when this rank was removed (a live rank of a lost replica) or
  // fenced: Shrink's FailedPrecondition. params are then where it stopped.
  std::string left_because;
  devmesh::ErrorInfo left_info;  // its payloads: fenced, removed_in_epoch
  std::string last_error;     // the last failed call's error ("" if none)
  devmesh::ErrorInfo last_error_info;  // its payloads: the peer, fenced, ...
  int64_t epoch = 0;          // the mesh's epoch at the end
  // The mesh at the end (the last Shrink's when it shrank): go on with it
  // (DeviceMesh::Grow, another Train).
  std::optional<DeviceMesh> mesh;
};

// Trains `mesh` (2-d, with dims named options.replica_dim and
// options.shard_dim) for options.steps steps. Errors: a collective's or
// Shrink's error other than this rank being removed or fenced (those end
// the loop with TrainResult::left_because set).
absl::StatusOr<TrainResult> Train(DeviceMesh mesh, const TrainOptions& options,
                                  const Hook& hook = nullptr);

// The parameters of shard `shard` of `shards` after `steps` steps of a fresh
// run that uses schedule[k].second replicas from step schedule[k].first on
// (schedule sorted, starting at step 0).
std::vector<float> Reference(int64_t shards, int64_t shard, int64_t steps,
                             const std::vector<std::pair<int64_t, int64_t>>&
                                 schedule);

}  // namespace elastic_example
}  // namespace devmesh

#endif  // DEVMESH_EXAMPLES_ELASTIC_ELASTIC_TRAINING_H_
