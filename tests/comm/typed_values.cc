// devmesh/tests/comm/typed_values.cc
#include "tests/comm/typed_values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "comm/dtype.h"
#include "comm/reduce_functions.h"

namespace devmesh {
namespace testing {
namespace {

template <typename T>
void Put(std::vector<char>& out, size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
T Get(const void* data, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

std::vector<char> Encode(DataType dtype, const std::vector<double>& values) {
  std::vector<char> out(values.size() * DataTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DataType::kFloat32: Put<float>(out, i, static_cast<float>(v)); break;
      case DataType::kFloat64: Put<double>(out, i, v); break;
      case DataType::kFloat16:
        Put<uint16_t>(out, i, reduce_internal::FloatToFloat16(static_cast<float>(v)));
        break;
      case DataType::kBFloat16:
        Put<uint16_t>(out, i, reduce_internal::FloatToBFloat16(static_cast<float>(v)));
        break;
      case DataType::kInt8: Put<int8_t>(out, i, static_cast<int8_t>(v)); break;
      case DataType::kUInt8: Put<uint8_t>(out, i, static_cast<uint8_t>(v)); break;
      case DataType::kInt32: Put<int32_t>(out, i, static_cast<int32_t>(v)); break;
      case DataType::kInt64: Put<int64_t>(out, i, static_cast<int64_t>(v)); break;
    }
  }
  return out;
}

std::vector<double> Decode(DataType dtype, const void* data, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DataType::kFloat32: out[i] = Get<float>(data, i); break;
      case DataType::kFloat64: out[i] = Get<double>(data, i); break;
      case DataType::kFloat16:
        out[i] = reduce_internal::Float16ToFloat(Get<uint16_t>(data, i));
        break;
      case DataType::kBFloat16:
        out[i] = reduce_internal::BFloat16ToFloat(Get<uint16_t>(data, i));
        break;
      case DataType::kInt8: out[i] = Get<int8_t>(data, i); break;
      case DataType::kUInt8: out[i] = Get<uint8_t>(data, i); break;
      case DataType::kInt32: out[i] = Get<int32_t>(data, i); break;
      case DataType::kInt64: out[i] = Get<int64_t>(data, i); break;
    }
  }
  return out;
}

double InputValue(ReduceOp op, DataType dtype, int rank, size_t i) {
  const bool is_unsigned = dtype == DataType::kUInt8;
  if (op == ReduceOp::kProd) {
    const size_t k = (static_cast<size_t>(rank) + i) % 5;
    if (k == 0) return 2;
    if (k == 3 && !is_unsigned) return -1;
    return 1;
  }
  double v = static_cast<double>((static_cast<size_t>(rank) * 3 + i * 5) % 11);
  if (!is_unsigned) v -= 4;
  if (IsFloatingPoint(dtype) && (rank + i) % 2 == 1) v += 0.5;
  return v;
}

double ReduceValues(ReduceOp op, DataType dtype,
                    const std::vector<double>& inputs) {
  double acc = inputs[0];
  for (size_t k = 1; k < inputs.size(); ++k) {
    const double x = inputs[k];
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += x; break;
      case ReduceOp::kProd: acc *= x; break;
      case ReduceOp::kMin: acc = std::min(acc, x); break;
      case ReduceOp::kMax: acc = std::max(acc, x); break;
    }
  }
  if (op == ReduceOp::kAvg) {
    acc /= static_cast<double>(inputs.size());
    if (!IsFloatingPoint(dtype)) acc = std::trunc(acc);
  }
  return acc;
}

absl::Status CheckEqual(const std::string& what,
                        const std::vector<double>& expected,
                        const std::vector<double>& actual) {
  if (expected.size() != actual.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": size ", actual.size(), ", expected ", expected.size()));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != actual[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": element ", i, " is ", actual[i], ", expected ",
          expected[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace devmesh
