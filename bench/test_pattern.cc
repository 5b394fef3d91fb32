#include "bench/test_pattern.h"

#include <cstring>

namespace devmesh {
namespace {

// IEEE half of a small non-negative integer (< 2048): exact.
uint16_t HalfOf(int64_t n) {
  if (n == 0) return 0;
  int e = 0;
  while ((int64_t{1} << (e + 1)) <= n) ++e;
  const uint16_t mantissa = static_cast<uint16_t>((n << (10 - e)) & 0x3ff);
  return static_cast<uint16_t>(((e + 15) << 10) | mantissa);
}

// bfloat16 of a small integer: the top half of its float32 bits (exact for
// integers below 256).
uint16_t BFloat16Of(int64_t n) {
  const float f = static_cast<float>(n);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

template <typename T>
void Store(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
T Load(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

void Put(void* buf, size_t i, DataType dtype, int64_t n) {
  switch (dtype) {
    case DataType::kFloat32: Store<float>(buf, i, static_cast<float>(n)); break;
    case DataType::kFloat64: Store<double>(buf, i, static_cast<double>(n)); break;
    case DataType::kFloat16: Store<uint16_t>(buf, i, HalfOf(n)); break;
    case DataType::kBFloat16: Store<uint16_t>(buf, i, BFloat16Of(n)); break;
    case DataType::kInt8: Store<int8_t>(buf, i, static_cast<int8_t>(n)); break;
    case DataType::kUInt8: Store<uint8_t>(buf, i, static_cast<uint8_t>(n)); break;
    case DataType::kInt32: Store<int32_t>(buf, i, static_cast<int32_t>(n)); break;
    case DataType::kInt64: Store<int64_t>(buf, i, n); break;
  }
}

bool Equal(const void* buf, size_t i, DataType dtype, int64_t n) {
  switch (dtype) {
    case DataType::kFloat32: return Load<float>(buf, i) == static_cast<float>(n);
    case DataType::kFloat64: return Load<double>(buf, i) == static_cast<double>(n);
    case DataType::kFloat16: return Load<uint16_t>(buf, i) == HalfOf(n);
    case DataType::kBFloat16: return Load<uint16_t>(buf, i) == BFloat16Of(n);
    case DataType::kInt8: return Load<int8_t>(buf, i) == static_cast<int8_t>(n);
    case DataType::kUInt8: return Load<uint8_t>(buf, i) == static_cast<uint8_t>(n);
    case DataType::kInt32: return Load<int32_t>(buf, i) == static_cast<int32_t>(n);
    case DataType::kInt64: return Load<int64_t>(buf, i) == n;
  }
  return false;
}

}  // namespace

int64_t PatternExactLimit(DataType dtype) {
  switch (dtype) {
    case DataType::kInt8: return 127;
    case DataType::kUInt8: return 255;
    case DataType::kBFloat16: return 256;
    case DataType::kFloat16: return 2048;
    case DataType::kFloat32: return int64_t{1} << 24;
    case DataType::kInt32: return INT32_MAX;
    case DataType::kFloat64: return int64_t{1} << 53;
    case DataType::kInt64: return INT64_MAX;
  }
  return 0;
}

int64_t PatternRankFactor(int global_rank) { return global_rank % 5 + 1; }

void FillPattern(void* buf, size_t count, DataType dtype, int global_rank) {
  const int64_t f = PatternRankFactor(global_rank);
  for (size_t i = 0; i < count; ++i) Put(buf, i, dtype, f * (i % 3 + 1));
}

int64_t CountWrong(const void* buf, size_t count, DataType dtype,
                   int64_t factor_sum) {
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!Equal(buf, i, dtype, factor_sum * static_cast<int64_t>(i % 3 + 1))) {
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace devmesh
