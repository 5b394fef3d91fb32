// devmesh/comm/float16.h
// -----------------------------------------------------------------------------
// Float16 and BFloat16: element types for the typed collectives
// (comm/typed_collectives.h), so that a buffer of IEEE half floats or of
// bfloat16 values deduces DataType::kFloat16 or DataType::kBFloat16 instead of
// being a bare uint16_t whose meaning the call cannot know.
//
// Each holds the 16 bits of one value and nothing else (2 bytes, trivially
// copyable, standard layout), so a std::vector<Float16> has the memory layout
// of a CUDA __half or PyTorch float16 array and can be passed where those are
// expected. They do no arithmetic: the backends reduce them (widened to float,
// as NCCL does). Convert to and from float with your own code or library
// (e.g. CUDA's __float2half, Eigen::half).
//
// Thread-safety: plain values.
#ifndef DEVMESH_COMM_FLOAT16_H_
#define DEVMESH_COMM_FLOAT16_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <type_traits>

namespace devmesh {

// An IEEE 754 binary16 value: 1 sign, 5 exponent, 10 mantissa bits.
// Example: Float16{0x3C00} is 1.0.
struct Float16 {
  uint16_t bits = 0;
};

// A bfloat16 value: the upper 16 bits of a float32 (1 sign, 8 exponent,
// 7 mantissa bits). Example: BFloat16{0x3F80} is 1.0.
struct BFloat16 {
  uint16_t bits = 0;
};

// Bitwise equality (so +0 != -0 and a NaN equals the same NaN bits).
inline bool operator==(Float16 a, Float16 b) { return a.bits == b.bits; }
inline bool operator!=(Float16 a, Float16 b) { return a.bits != b.bits; }
inline bool operator==(BFloat16 a, BFloat16 b) { return a.bits == b.bits; }
inline bool operator!=(BFloat16 a, BFloat16 b) { return a.bits != b.bits; }

static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2,
              "Float16 and BFloat16 must be 2 bytes");
static_assert(std::is_trivially_copyable_v<Float16> &&
                  std::is_trivially_copyable_v<BFloat16>,
              "Float16 and BFloat16 must be trivially copyable");
static_assert(std::is_standard_layout_v<Float16> &&
                  std::is_standard_layout_v<BFloat16>,
              "Float16 and BFloat16 must be standard layout");

}  // namespace devmesh

#endif  // DEVMESH_COMM_FLOAT16_H_
