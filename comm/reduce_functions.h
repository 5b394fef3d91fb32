// devmesh/comm/reduce_functions.h
// -----------------------------------------------------------------------------
// Element-wise reductions for the CPU backends, for every (DataType,
// ReduceOp): the Gloo backend hands them to Gloo's allreduce
// (AllreduceOptions::setReduceFunction; Gloo's own ReductionFunction covers
// native types only), and the shared-memory backend (comm/shm) calls them on
// the members' segment slots.
//
// Arithmetic: integer sum and prod wrap modulo 2^bits (done in unsigned
// arithmetic, as NCCL does on the GPU); float16 and bfloat16 are widened to
// float32, reduced, and rounded back to nearest-even. kAvg reduces as kSum;
// the caller then divides by the group size with DivideInPlace (integers
// truncate toward zero, PyTorch's rule for integer true division followed by
// a cast). Thread-safety: pure functions.
#ifndef DEVMESH_COMM_REDUCE_FUNCTIONS_H_
#define DEVMESH_COMM_REDUCE_FUNCTIONS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <functional>

#include "comm/communicator.h"

namespace devmesh {
namespace reduce_internal {

// out[i] = a[i] op b[i] for i < n; out may alias a or b.
using ReduceFunc = std::function<void(void*, const void*, const void*, size_t)>;

// The reduction for (dtype, op) (kAvg gives the sum). Returns an empty
// function for a dtype value outside the enum.
ReduceFunc GetReduceFunction(DataType dtype, ReduceOp op);

// data[i] /= divisor for i < count, in dtype's arithmetic.
void DivideInPlace(void* data, size_t count, DataType dtype, int divisor);

// bfloat16 <-> float32 (round to nearest even; NaN stays NaN).
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
// float16 <-> float32: exact widening; narrowing rounds to nearest even,
// overflows to infinity, keeps the sign of a zero; a NaN becomes the
// canonical quiet NaN (0x7FFF in float16, 0x7FFFFFFF in float32).
float Float16ToFloat(uint16_t bits);
uint16_t FloatToFloat16(float value);

}  // namespace reduce_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_REDUCE_FUNCTIONS_H_
