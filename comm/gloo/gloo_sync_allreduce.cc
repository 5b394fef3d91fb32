// devmesh/comm/gloo/gloo_sync_allreduce.cc
// All-reduces over synchronous Gloo pairs: gloo_sync_allreduce.h says why
// and how.
#include "comm/gloo/gloo_sync_allreduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_device.h"
#include "comm/gloo/gloo_full_mesh.h"
#include "comm/gloo/gloo_shutdown.h"
#include "comm/gloo/gloo_status.h"
#include "comm/reduce_functions.h"
#include "config/settings.h"
#include "gloo/allreduce_bcube.h"

namespace devmesh {
namespace gloo_internal {
namespace {

// Gloo's ReductionFunction holds a plain function pointer; devmesh's
// reductions are std::functions chosen per (dtype, op). Run sets the one
// its algorithm uses here, on the thread that runs the algorithm (Gloo's
// Buffer algorithms reduce on the calling thread).
thread_local const reduce_internal::ReduceFunc* current_reduce = nullptr;

template <typename S>
void ReduceTrampoline(S* x, const S* y, size_t n) {
  (*current_reduce)(x, x, y, n);
}

// One ReductionFunction per element width, never freed (Gloo's own are
// leaked statics too).
template <typename S>
const ::gloo::ReductionFunction<S>* Trampoline() {
  static const auto* fn =
      new ::gloo::ReductionFunction<S>(::gloo::SUM, &ReduceTrampoline<S>);
  return fn;
}

template <typename S>
std::unique_ptr<::gloo::Algorithm> Build(
    const std::shared_ptr<::gloo::Context>& context, void* staging,
    size_t count) {
  std::vector<S*> ptrs{static_cast<S*>(staging)};
  return std::make_unique<::gloo::AllreduceBcube<S>>(
      context, ptrs, static_cast<int>(count), Trampoline<S>());
}

class ScopedReduce {
 public:
  explicit ScopedReduce(const reduce_internal::ReduceFunc* fn) {
    current_reduce = fn;
  }
  ~ScopedReduce() { current_reduce = nullptr; }
};

}  // namespace

size_t GlooSyncMaxBytes() {
  return ProcessSettings().gloo_sync_max_bytes.value_or(kGlooSyncMaxBytes);
}

bool SyncAllreduce::SizeFits(int size) {
  return size >= 2 && (size & (size - 1)) == 0;
}

std::vector<int> SyncAllreduce::Partners(int rank, int size) {
  std::vector<int> partners;
  for (int bit = 1; bit < size; bit <<= 1) partners.push_back(rank ^ bit);
  std::sort(partners.begin(), partners.end());
  return partners;
}

bool GlooSyncRouteWanted(int size, bool crosses_hosts) {
  const GlooSyncRoute mode =
      ProcessSettings().gloo_sync_route.value_or(GlooSyncRoute::kAcrossHosts);
  if (!SyncAllreduce::SizeFits(size)) return false;
  return mode == GlooSyncRoute::kEveryGroup ||
         (mode == GlooSyncRoute::kAcrossHosts && crosses_hosts);
}

std::unique_ptr<SyncAllreduce> SyncAllreduce::FromMesh(int rank, int size,
                                                       FullMesh mesh) {
  std::unique_ptr<SyncAllreduce> sync(new SyncAllreduce());
  sync->rank_ = rank;
  sync->size_ = size;
  sync->context_ = std::move(mesh.context);
  sync->peer_endpoints_ = std::move(mesh.peer_endpoints);
  sync->connections_ = std::move(mesh.connections);
  return sync;
}

SyncAllreduce::~SyncAllreduce() {
  // The algorithms' buffers first (they unregister from the pairs), then
  // the pairs (the context's destructor closes them; a synchronous pair's
  // close waits for no loop turn).
  cache_.clear();
  context_.reset();
}

int64_t SyncAllreduce::SlotsPerBuild() const {
  return 2 * int64_t{size_} * (size_ - 1);
}

bool SyncAllreduce::Fits(size_t count, DataType dtype, ReduceOp op) const {
  // Gloo's Buffer algorithms count elements in an int.
  if (count > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return false;
  }
  for (const Entry& e : cache_) {
    if (e.count == count && e.dtype == dtype && e.op == op) return true;
  }
  return slots_used_ + SlotsPerBuild() <= kSyncSlotBudget;
}

SyncAllreduce::Entry& SyncAllreduce::Lookup(size_t count, DataType dtype,
                                            ReduceOp op) {
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->count == count && it->dtype == dtype && it->op == op) {
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front();
    }
  }
  const size_t elem = DataTypeSize(dtype);
  const size_t bytes = count * elem;
  // Make room first: the same evictions on every member.
  while (!cache_.empty() && (cache_.size() >= kSyncCacheEntries ||
                             cache_bytes_ + bytes > kSyncCacheBytes)) {
    cache_bytes_ -= cache_.back().bytes;
    cache_.pop_back();
  }
  Entry entry;
  entry.count = count;
  entry.dtype = dtype;
  entry.op = op;
  entry.bytes = bytes;
  entry.staging.resize((bytes + 7) / 8);
  entry.reduce = reduce_internal::GetReduceFunction(dtype, op);
  void* staging = entry.staging.data();
  switch (elem) {
    case 1:
      entry.algorithm = Build<uint8_t>(context_, staging, count);
      break;
    case 2:
      entry.algorithm = Build<uint16_t>(context_, staging, count);
      break;
    case 4:
      entry.algorithm = Build<uint32_t>(context_, staging, count);
      break;
    default:
      entry.algorithm = Build<uint64_t>(context_, staging, count);
      break;
  }
  slots_used_ += SlotsPerBuild();
  ++builds_;
  cache_bytes_ += bytes;
  cache_.push_front(std::move(entry));
  return cache_.front();
}

void SyncAllreduce::Run(const void* in, void* out, size_t count,
                        DataType dtype, ReduceOp op) {
  if (broken_) {
    throw std::runtime_error(
        "the group's synchronous route failed to build an algorithm earlier "
        "(its Gloo slots may differ from its peers'); abort and re-create "
        "the group");
  }
  Entry* found = nullptr;
  try {
    found = &Lookup(count, dtype, op);
  } catch (...) {
    broken_ = true;
    throw;
  }
  Entry& entry = *found;
  std::memcpy(entry.staging.data(), in, entry.bytes);
  {
    ScopedReduce reduce(&entry.reduce);
    entry.algorithm->run();
  }
  std::memcpy(out, entry.staging.data(), entry.bytes);
}

void SyncAllreduce::Abort() {
  if (aborted_.exchange(true)) return;
  // A read blocked on another thread returns at once (it holds the pair's
  // lock, which close() below then takes). Only the pairs whose socket was
  // shut are closed here: a pair whose socket was not found (gone already)
  // may have a read in progress, and close() would wait for it; its next
  // read or write fails on its own.
  const std::set<int> shut = ShutdownConnections(connections_);
  (void)GlooCall("gloo abort (synchronous pairs)", [&] {
    for (int i : Partners(rank_, size_)) {
      if (shut.count(i) == 0) continue;
      if (auto& pair = context_->getPair(i)) pair->close();
    }
  });
}

}  // namespace gloo_internal
}  // namespace devmesh
