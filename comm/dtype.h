// devmesh/comm/dtype.h
// -----------------------------------------------------------------------------
// DataType and ReduceOp helpers. The enums and the functions DataTypeSize,
// DataTypeName, ParseDataType and ReduceOpName are declared in
// comm/communicator.h (the fixed contract); this header adds the inverse of
// ReduceOpName and the list of every dtype and op, for flags and tests.
//
// Names follow PyTorch's dtype names ("float32", "bfloat16", "int8", ...) and
// its ReduceOp names in lower case ("sum", "prod", "min", "max", "avg").
// Thread-safety: all functions are pure.
#ifndef DEVMESH_COMM_DTYPE_H_
#define DEVMESH_COMM_DTYPE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <array>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/communicator.h"

namespace devmesh {

// Every DataType, in declaration order.
inline constexpr std::array<DataType, 8> kAllDataTypes = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
    DataType::kBFloat16, DataType::kInt8,   DataType::kUInt8,
    DataType::kInt32,   DataType::kInt64};

// Every ReduceOp, in declaration order.
inline constexpr std::array<ReduceOp, 5> kAllReduceOps = {
    ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
    ReduceOp::kAvg};

// Inverse of ReduceOpName. Errors: InvalidArgument naming `name` and listing
// the valid names.
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// True for float32, float64, float16 and bfloat16.
bool IsFloatingPoint(DataType dtype);

}  // namespace devmesh

#endif  // DEVMESH_COMM_DTYPE_H_
