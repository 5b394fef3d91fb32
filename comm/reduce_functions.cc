// devmesh/comm/reduce_functions.cc
#include "comm/reduce_functions.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace devmesh {
namespace reduce_internal {
namespace {

// Native element types. Integer sum/prod go through the unsigned type so that
// overflow wraps instead of being undefined. The op is a template argument:
// the per-element loop then has no branch on it, and the compiler can
// vectorize it (a runtime switch per element was the cost before).
template <typename T, ReduceOp kOp>
inline T Combine(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote to at least unsigned int so that uint8/uint16 multiply cannot
    // overflow a signed int.
    using W = std::common_type_t<U, unsigned int>;
    if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
      return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) +
                                            static_cast<W>(static_cast<U>(b))));
    } else if constexpr (kOp == ReduceOp::kProd) {
      return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                            static_cast<W>(static_cast<U>(b))));
    } else if constexpr (kOp == ReduceOp::kMin) {
      return std::min(a, b);
    } else {
      return std::max(a, b);
    }
  } else {
    if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
      return a + b;
    } else if constexpr (kOp == ReduceOp::kProd) {
      return a * b;
    } else if constexpr (kOp == ReduceOp::kMin) {
      return std::isnan(a) ? a : (b < a ? b : a);  // NaN propagates.
    } else {
      return std::isnan(a) ? a : (b > a ? b : a);
    }
  }
}

template <typename T, ReduceOp kOp>
void NativeKernel(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = Combine<T, kOp>(x[i], y[i]);
}

// 16-bit floats stored as uint16_t: widen, combine, round back.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float),
          ReduceOp kOp>
void HalfKernel(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) {
    o[i] = FromFloat(Combine<float, kOp>(ToFloat(x[i]), ToFloat(y[i])));
  }
}

using KernelPtr = void (*)(void*, const void*, const void*, size_t);

// The kernel of `op` from a family templated on the op (kAvg sums; the
// caller divides afterwards).
template <template <ReduceOp> class Family>
KernelPtr Pick(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return &Family<ReduceOp::kSum>::Run;
    case ReduceOp::kProd:
      return &Family<ReduceOp::kProd>::Run;
    case ReduceOp::kMin:
      return &Family<ReduceOp::kMin>::Run;
    case ReduceOp::kMax:
      return &Family<ReduceOp::kMax>::Run;
  }
  return nullptr;
}

template <typename T>
struct NativeOf {
  template <ReduceOp kOp>
  struct Op {
    static void Run(void* out, const void* a, const void* b, size_t n) {
      NativeKernel<T, kOp>(out, a, b, n);
    }
  };
};

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct HalfOf {
  template <ReduceOp kOp>
  struct Op {
    static void Run(void* out, const void* a, const void* b, size_t n) {
      HalfKernel<ToFloat, FromFloat, kOp>(out, a, b, n);
    }
  };
};

template <typename T>
ReduceFunc Native(ReduceOp op) {
  KernelPtr kernel = Pick<NativeOf<T>::template Op>(op);
  return kernel == nullptr ? ReduceFunc() : ReduceFunc(kernel);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
ReduceFunc Half(ReduceOp op) {
  KernelPtr kernel = Pick<HalfOf<ToFloat, FromFloat>::template Op>(op);
  return kernel == nullptr ? ReduceFunc() : ReduceFunc(kernel);
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

// IEEE binary16 (1 sign, 5 exponent bits biased by 15, 10 mantissa bits) to
// binary32 (8 exponent bits biased by 127, 23 mantissa bits): exact for every
// value; a subnormal half is normalized; every NaN becomes 0x7FFFFFFF.
float Float16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = static_cast<uint32_t>(bits & 0x3FFu) << 13;
  uint32_t wide;
  if (exponent == 0x1F) {
    wide = mantissa != 0 ? 0x7FFFFFFFu : (sign | 0x7F800000u);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      wide = sign;
    } else {
      // 0.m x 2^-14: shift until the leading one is the implicit bit.
      exponent = 127 - 14;
      while ((mantissa & 0x800000u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      wide = sign | (exponent << 23) | (mantissa & 0x7FFFFFu);
    }
  } else {
    wide = sign | ((exponent + 127 - 15) << 23) | mantissa;
  }
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// binary32 to binary16, rounding to nearest with ties to even: magnitudes
// from 65520 up become infinity, below 2^-25 (half the smallest subnormal,
// 2^-24) zero with the sign kept; every NaN becomes 0x7FFF.
uint16_t FloatToFloat16(float value) {
  uint32_t wide;
  std::memcpy(&wide, &value, sizeof(wide));
  const uint32_t magnitude = wide & 0x7FFFFFFFu;
  const uint16_t sign = static_cast<uint16_t>((wide >> 16) & 0x8000u);
  if (magnitude > 0x7F800000u) return 0x7FFF;                // NaN
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;       // >= 65520: inf
  if (magnitude <= 0x33000000u) return sign;                 // <= 2^-25: zero
  uint32_t exponent = magnitude >> 23;
  uint32_t mantissa = magnitude & 0x7FFFFFu;
  uint32_t shift;
  if (exponent > 127 - 15) {  // a normal half: drop 13 mantissa bits
    shift = 13;
    exponent -= 127 - 15;
  } else {  // a subnormal half: the implicit one joins the mantissa
    shift = 126 - exponent;
    exponent = 0;
    mantissa |= 0x800000u;
  }
  const uint32_t dropped = mantissa & ((1u << shift) - 1);
  const uint32_t half_way = 1u << (shift - 1);
  mantissa >>= shift;
  if (dropped > half_way || (dropped == half_way && (mantissa & 1u) != 0)) {
    ++mantissa;  // may carry into the exponent: still the right encoding
  }
  return static_cast<uint16_t>(sign | ((exponent << 10) + mantissa));
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

}  // namespace reduce_internal
}  // namespace devmesh
