// devmesh/tests/comm/float16_conversion_test.cc
// comm/reduce_functions.h's float16 <-> float32 conversions: literal bit
// patterns (zeros, subnormals, the largest finite, infinities, NaN, ties),
// and equality with Gloo's conversions (gloo/types.h), which devmesh used
// before, on all 65536 halves and on every float next to a rounding boundary.
#include <cstdint>
#include <cstring>

#include "comm/reduce_functions.h"
#include "gloo/types.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

using reduce_internal::Float16ToFloat;
using reduce_internal::FloatToFloat16;

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t ToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

uint16_t GlooToHalf(float value) { return ::gloo::cpu_float2half_rn(value).x; }

uint32_t GlooToFloatBits(uint16_t bits) {
  ::gloo::float16 h;
  h.x = bits;
  return ToBits(::gloo::cpu_half2float(h));
}

TEST(Float16Conversion, NarrowingBitPatterns) {
  EXPECT_EQ(FloatToFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFloat16(1.0f), 0x3C00);
  EXPECT_EQ(FloatToFloat16(-2.0f), 0xC000);
  EXPECT_EQ(FloatToFloat16(65504.0f), 0x7BFF);  // the largest finite
  EXPECT_EQ(FloatToFloat16(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToFloat16(65520.0f), 0x7C00);  // the tie rounds to infinity
  EXPECT_EQ(FloatToFloat16(-1e9f), 0xFC00);
  EXPECT_EQ(FloatToFloat16(FromBits(0x7F800000)), 0x7C00);
  EXPECT_EQ(FloatToFloat16(FromBits(0xFF800000)), 0xFC00);
  EXPECT_EQ(FloatToFloat16(FromBits(0x7FC00000)), 0x7FFF);  // NaN
  EXPECT_EQ(FloatToFloat16(FromBits(0xFFC00001)), 0x7FFF);
  EXPECT_EQ(FloatToFloat16(FromBits(0x7F800001)), 0x7FFF);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties to zero (even), a hair
  // above it to 2^-24; 1.5 x 2^-24 ties to 2 x 2^-24 (even).
  EXPECT_EQ(FloatToFloat16(FromBits(0x33800000)), 0x0001);  // 2^-24
  EXPECT_EQ(FloatToFloat16(FromBits(0x33000000)), 0x0000);  // 2^-25
  EXPECT_EQ(FloatToFloat16(FromBits(0xB3000000)), 0x8000);
  EXPECT_EQ(FloatToFloat16(FromBits(0x33000001)), 0x0001);
  EXPECT_EQ(FloatToFloat16(FromBits(0x33C00000)), 0x0002);  // 1.5 x 2^-24
  EXPECT_EQ(FloatToFloat16(FromBits(0x38800000)), 0x0400);  // 2^-14
  EXPECT_EQ(FloatToFloat16(FromBits(0x387FC000)), 0x03FF);  // the largest
  EXPECT_EQ(FloatToFloat16(FromBits(0x387FE000)), 0x0400);  // tie, even
  EXPECT_EQ(FloatToFloat16(FromBits(0x387F6000)), 0x03FE);  // tie, even
  // Normal ties: 1 + 2^-11 is half way between 1 and 1 + 2^-10 (even: 1);
  // 1 + 3 x 2^-11 between 1 + 2^-10 and 1 + 2^-9 (even: the upper).
  EXPECT_EQ(FloatToFloat16(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(FloatToFloat16(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(FloatToFloat16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_EQ(FloatToFloat16(FromBits(0x3FFFF000)), 0x4000);  // carries to 2
}

TEST(Float16Conversion, WideningBitPatterns) {
  EXPECT_EQ(ToBits(Float16ToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x3C00)), 0x3F800000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x7BFF)), 0x477FE000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x0001)), 0x33800000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x8001)), 0xB3800000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x03FF)), 0x387FC000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x0400)), 0x38800000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x7C00)), 0x7F800000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0xFC00)), 0xFF800000u);
  EXPECT_EQ(ToBits(Float16ToFloat(0x7E00)), 0x7FFFFFFFu);  // NaN
  EXPECT_EQ(ToBits(Float16ToFloat(0xFC01)), 0x7FFFFFFFu);
}

TEST(Float16Conversion, EveryHalfAsGloo) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    ASSERT_EQ(ToBits(Float16ToFloat(bits)), GlooToFloatBits(bits))
        << "half 0x" << std::hex << h;
    // Every non-NaN half survives the round trip.
    if ((h & 0x7FFF) <= 0x7C00) {
      ASSERT_EQ(FloatToFloat16(Float16ToFloat(bits)), bits)
          << "half 0x" << std::hex << h;
    }
  }
}

TEST(Float16Conversion, FloatsNearEveryBoundaryAsGloo) {
  // For each finite half: the float at it, the midpoint to the next half
  // (a tie), and the floats a few ulps either side of both.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const uint32_t at = ToBits(Float16ToFloat(static_cast<uint16_t>(h)));
    const uint32_t next =
        ToBits(Float16ToFloat(static_cast<uint16_t>(h + 1)));
    const uint32_t mid = ToBits(
        (FromBits(at) + FromBits(next)) / 2.0f);  // exact: one more bit
    for (uint32_t base : {at, mid}) {
      for (int d = -2; d <= 2; ++d) {
        for (uint32_t sign : {0u, 0x80000000u}) {
          const float f = FromBits((base + d) | sign);
          ASSERT_EQ(FloatToFloat16(f), GlooToHalf(f))
              << "float bits 0x" << std::hex << ((base + d) | sign);
        }
      }
    }
  }
  // A stride through every float bit pattern (NaNs and infinities too).
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 65521) {
    const float f = FromBits(static_cast<uint32_t>(bits));
    ASSERT_EQ(FloatToFloat16(f), GlooToHalf(f))
        << "float bits 0x" << std::hex << bits;
  }
}

}  // namespace
}  // namespace devmesh
