// devmesh/comm/gloo/reduce_functions.cc
#include "comm/gloo/reduce_functions.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "gloo/types.h"

namespace devmesh {
namespace gloo_internal {
namespace {

// Native element types. Integer sum/prod go through the unsigned type so that
// overflow wraps instead of being undefined.
template <typename T>
T Combine(T a, T b, ReduceOp op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote to at least unsigned int so that uint8/uint16 multiply cannot
    // overflow a signed int.
    using W = std::common_type_t<U, unsigned int>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) +
                                              static_cast<W>(static_cast<U>(b))));
      case ReduceOp::kProd:
        return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                              static_cast<W>(static_cast<U>(b))));
      case ReduceOp::kMin:
        return std::min(a, b);
      case ReduceOp::kMax:
        return std::max(a, b);
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return a + b;
      case ReduceOp::kProd:
        return a * b;
      case ReduceOp::kMin:
        return std::isnan(a) ? a : (b < a ? b : a);  // NaN propagates.
      case ReduceOp::kMax:
        return std::isnan(a) ? a : (b > a ? b : a);
    }
  }
  return a;
}

template <typename T>
ReduceFunc Native(ReduceOp op) {
  return [op](void* out, const void* a, const void* b, size_t n) {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) o[i] = Combine<T>(x[i], y[i], op);
  };
}

// 16-bit floats stored as uint16_t: widen, combine, round back.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
ReduceFunc Half(ReduceOp op) {
  return [op](void* out, const void* a, const void* b, size_t n) {
    uint16_t* o = static_cast<uint16_t*>(out);
    const uint16_t* x = static_cast<const uint16_t*>(a);
    const uint16_t* y = static_cast<const uint16_t*>(b);
    for (size_t i = 0; i < n; ++i) {
      o[i] = FromFloat(Combine<float>(ToFloat(x[i]), ToFloat(y[i]), op));
    }
  };
}

template <typename T>
void DivideNative(void* data, size_t count, int divisor) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      // Truncates toward zero; the divisor is never narrowed to T.
      p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / divisor);
    } else {
      p[i] = p[i] / static_cast<T>(divisor);
    }
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void DivideHalf(void* data, size_t count, int divisor) {
  uint16_t* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) {
    p[i] = FromFloat(ToFloat(p[i]) / static_cast<float>(divisor));
  }
}

}  // namespace

float BFloat16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Float16ToFloat(uint16_t bits) {
  ::gloo::float16 h;
  h.x = bits;
  return ::gloo::cpu_half2float(h);
}

uint16_t FloatToFloat16(float value) {
  return ::gloo::cpu_float2half_rn(value).x;
}

ReduceFunc GetReduceFunction(DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kFloat32:
      return Native<float>(op);
    case DataType::kFloat64:
      return Native<double>(op);
    case DataType::kFloat16:
      return Half<Float16ToFloat, FloatToFloat16>(op);
    case DataType::kBFloat16:
      return Half<BFloat16ToFloat, FloatToBFloat16>(op);
    case DataType::kInt8:
      return Native<int8_t>(op);
    case DataType::kUInt8:
      return Native<uint8_t>(op);
    case DataType::kInt32:
      return Native<int32_t>(op);
    case DataType::kInt64:
      return Native<int64_t>(op);
  }
  return ReduceFunc();
}

void DivideInPlace(void* data, size_t count, DataType dtype, int divisor) {
  switch (dtype) {
    case DataType::kFloat32:
      return DivideNative<float>(data, count, divisor);
    case DataType::kFloat64:
      return DivideNative<double>(data, count, divisor);
    case DataType::kFloat16:
      return DivideHalf<Float16ToFloat, FloatToFloat16>(data, count, divisor);
    case DataType::kBFloat16:
      return DivideHalf<BFloat16ToFloat, FloatToBFloat16>(data, count,
                                                          divisor);
    case DataType::kInt8:
      return DivideNative<int8_t>(data, count, divisor);
    case DataType::kUInt8:
      return DivideNative<uint8_t>(data, count, divisor);
    case DataType::kInt32:
      return DivideNative<int32_t>(data, count, divisor);
    case DataType::kInt64:
      return DivideNative<int64_t>(data, count, divisor);
  }
}

}  // namespace gloo_internal
}  // namespace devmesh
