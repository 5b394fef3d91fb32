// devmesh/comm/dtype.cc
#include "comm/dtype.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace devmesh {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt8:
    case DataType::kUInt8:
      return 1;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
  }
  return 0;  // Not reached for a valid enum value.
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "unknown";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  for (DataType dtype : kAllDataTypes) {
    if (DataTypeName(dtype) == name) return dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype \"", name,
      "\"; expected one of float32, float64, float16, bfloat16, int8, uint8, "
      "int32, int64"));
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown";
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (ReduceOp op : kAllReduceOps) {
    if (ReduceOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reduce op \"", name,
      "\"; expected one of sum, prod, min, max, avg"));
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
         dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

}  // namespace devmesh
