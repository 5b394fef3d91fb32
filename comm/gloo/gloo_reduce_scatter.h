// devmesh/comm/gloo/gloo_reduce_scatter.h
// -----------------------------------------------------------------------------
// Ring reduce-scatter over Gloo unbound buffers (Gloo 0.5 has no
// options-style reduce_scatter). Group rank r ends with block r of the
// element-wise reduction of every rank's `work`. Bandwidth-optimal: each rank
// sends and receives (size - 1) blocks.
#ifndef DEVMESH_COMM_GLOO_GLOO_REDUCE_SCATTER_H_
#define DEVMESH_COMM_GLOO_GLOO_REDUCE_SCATTER_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/reduce_functions.h"
#include "gloo/context.h"

namespace devmesh {
namespace gloo_internal {

// `work` holds context->size blocks of `block_bytes` (each `block_elems`
// elements) and is overwritten; on return its block context->rank holds the
// reduced result. Called by every rank of the context in the same order.
// Throws Gloo exceptions (callers wrap it in GlooCall).
void RingReduceScatter(const std::shared_ptr<::gloo::Context>& context,
                       char* work, size_t block_elems, size_t block_bytes,
                       const reduce_internal::ReduceFunc& reduce, uint64_t slot,
                       std::chrono::milliseconds timeout);

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_REDUCE_SCATTER_H_
