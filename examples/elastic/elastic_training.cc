// devmesh/examples/elastic/elastic_training.cc
#include "examples/elastic/elastic_training.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "status/status_macros.h"

namespace devmesh {
namespace elastic_example {
namespace {

float Gradient(int64_t step, int64_t replica, int j, float total) {
  return std::fmod(static_cast<float>(step + replica + j) + total, 5.0f) + 1.0f;
}

std::vector<float> Initial(int64_t shard) {
  std::vector<float> p(kShard);
  for (int j = 0; j < kShard; ++j) p[j] = static_cast<float>(shard * kShard + j);
  return p;
}

// The compute phase of `step` (TrainOptions::compute), in slices of at
// most 5 ms; Unavailable with the job's verdict once `died` is set.
absl::Status Compute(const DeviceMesh& mesh, const TrainOptions& o,
                     int64_t step, const std::atomic<bool>& died) {
  if (!o.compute) return absl::OkStatus();
  const absl::Time end = absl::Now() + o.compute(step);
  for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
    if (died.load()) {
      absl::StatusOr<Verdict> verdict =
          mesh.WaitForFailure(absl::InfinitePast());
      if (!verdict.ok()) return verdict.status();
      // The dead rank as the error's payload, as a failed collective's.
      return WithPeer(
          absl::UnavailableError(absl::StrCat("stopped computing step ", step,
                                              ": ", verdict->text)),
          verdict->rank);
    }
    absl::SleepFor(std::min(absl::Milliseconds(5), end - now));
  }
  return absl::OkStatus();
}

// One training step on `mesh` (see the header); `params` changes only when
// both collectives succeed.
absl::Status Step(const DeviceMesh& mesh, const TrainOptions& o,
                  const Hook& hook, int64_t step, std::vector<float>& params,
                  std::vector<float>& buf, const std::atomic<bool>& died) {
  auto at = [&](Point p) {
    if (hook) hook(p, step, mesh.epoch());
  };
  DEVMESH_RETURN_IF_ERROR(Compute(mesh, o, step, died));
  DEVMESH_ASSIGN_OR_RETURN(auto shard_group, mesh.GetGroup(o.shard_dim));
  DEVMESH_ASSIGN_OR_RETURN(auto replica_group, mesh.GetGroup(o.replica_dim));
  DEVMESH_ASSIGN_OR_RETURN(const int64_t replica,
                           mesh.GetLocalRank(o.replica_dim));
  std::fill(buf.begin(), buf.end(), 0.0f);
  for (float p : params) buf[0] += p;
  at(Point::kBeforeShardAllReduce);
  DEVMESH_RETURN_IF_ERROR(shard_group->AllReduce(
      absl::MakeSpan(buf), ReduceOp::kSum));
  const float total = buf[0];
  std::fill(buf.begin(), buf.end(), 0.0f);
  for (int j = 0; j < kShard; ++j) buf[j] = Gradient(step, replica, j, total);
  at(Point::kBeforeReplicaAllReduce);
  DEVMESH_RETURN_IF_ERROR(replica_group->AllReduce(
      absl::MakeSpan(buf), ReduceOp::kSum));
  for (int j = 0; j < kShard; ++j) {
    params[j] = std::fmod(params[j] + buf[j], 1000.0f);
  }
  return absl::OkStatus();
}

// The last step every rank of `mesh` completed: the minimum of `done` over
// both dims.
absl::StatusOr<int64_t> AgreeOnStep(const DeviceMesh& mesh,
                                    const TrainOptions& o, int64_t done) {
  int64_t step = done;
  for (const std::string& dim : {o.replica_dim, o.shard_dim}) {
    DEVMESH_ASSIGN_OR_RETURN(auto group, mesh.GetGroup(dim));
    DEVMESH_RETURN_IF_ERROR(group->AllReduce(&step, &step, 1,
                                             DataType::kInt64, ReduceOp::kMin));
  }
  return step;
}

}  // namespace

absl::StatusOr<TrainResult> Train(DeviceMesh mesh, const TrainOptions& o,
                                  const Hook& hook) {
  TrainResult out;
  DEVMESH_ASSIGN_OR_RETURN(out.shard, mesh.GetLocalRank(o.shard_dim));
  DEVMESH_ASSIGN_OR_RETURN(out.shards, mesh.size(o.shard_dim));
  std::vector<float> params = Initial(out.shard);
  int64_t done = 0;
  if (!o.start_params.empty()) {
    if (o.start_params.size() != params.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "start_params has ", o.start_params.size(), " values, want ",
          params.size()));
    }
    params = o.start_params;
    done = o.start_step;
  }
  std::map<int64_t, std::vector<float>> history = {{done, params}};
  std::vector<float> buf(static_cast<size_t>(o.pad) + kShard);
  // Hearing of a death while computing: `died` is set by the failure
  // watch's thread (none without a watch: then only a failed collective
  // tells). Subscribed again on each mesh Shrink returns.
  std::atomic<bool> died{false};
  auto subscribe = [&died](const DeviceMesh& m) {
    died = false;
    auto sub = m.OnFailure([&died](const Verdict&) { died = true; });
    return sub.ok() ? *std::move(sub) : nullptr;
  };
  std::unique_ptr<VerdictSubscription> subscription = subscribe(mesh);
  while (done < o.steps) {
    absl::Status s = Step(mesh, o, hook, done, params, buf, died);
    if (s.ok()) {
      ++done;
      history[done] = params;
      while (history.size() > static_cast<size_t>(kHistory)) {
        history.erase(history.begin());
      }
      if (o.on_step_done) o.on_step_done(done, params);
      continue;
    }
    // A failed step: shrink, then agree on where to resume. A death during
    // the agreement goes round again.
    Recovery rec;
    rec.failed_step = done;
    rec.failed_at = absl::Now();
    rec.error = s.ToString();
    out.last_error = rec.error;
    out.last_error_info = GetErrorInfo(s);
    while (true) {
      if (hook) hook(Point::kShrinkStart, done, mesh.epoch());
      auto shrunk = mesh.Shrink(o.replica_dim, o.shrink);
      if (!shrunk.ok()) {
        if (!absl::IsFailedPrecondition(shrunk.status())) {
          return shrunk.status();
        }
        out.left_because = std::string(shrunk.status().message());
        out.left_info = GetErrorInfo(shrunk.status());
        out.params = params;
        out.steps = done;
        out.epoch = mesh.epoch();
        out.mesh = mesh;
        return out;
      }
      mesh = shrunk->mesh;
      subscription = subscribe(mesh);
      rec.report = shrunk->report;
      rec.shrinks.push_back(shrunk->report);
      auto step = AgreeOnStep(mesh, o, done);
      if (!step.ok()) continue;  // another death: shrink again
      rec.resumed_at = absl::Now();
      rec.resumed_step = *step;
      break;
    }
    DEVMESH_ASSIGN_OR_RETURN(rec.replicas, mesh.size(o.replica_dim));
    auto kept = history.find(rec.resumed_step);
    if (kept == history.end()) {
      return absl::InternalError(absl::StrCat(
          "no parameters kept for step ", rec.resumed_step, " (this rank is at ",
          done, ")"));
    }
    params = kept->second;
    done = rec.resumed_step;
    history.erase(std::next(kept), history.end());
    out.recoveries.push_back(std::move(rec));
  }
  out.params = params;
  out.steps = done;
  out.epoch = mesh.epoch();
  out.mesh = mesh;
  return out;
}

std::vector<float> Reference(
    int64_t shards, int64_t shard, int64_t steps,
    const std::vector<std::pair<int64_t, int64_t>>& schedule) {
  std::vector<std::vector<float>> p;
  for (int64_t t = 0; t < shards; ++t) p.push_back(Initial(t));
  size_t k = 0;
  int64_t replicas = schedule.empty() ? 1 : schedule[0].second;
  for (int64_t s = 0; s < steps; ++s) {
    while (k < schedule.size() && schedule[k].first <= s) {
      replicas = schedule[k++].second;
    }
    float total = 0;
    for (const auto& shard_params : p) {
      float sum = 0;
      for (float v : shard_params) sum += v;
      total += sum;
    }
    for (auto& shard_params : p) {
      for (int j = 0; j < kShard; ++j) {
        float g = 0;
        for (int64_t i = 0; i < replicas; ++i) g += Gradient(s, i, j, total);
        shard_params[j] = std::fmod(shard_params[j] + g, 1000.0f);
      }
    }
  }
  return p[shard];
}

}  // namespace elastic_example
}  // namespace devmesh
