// devmesh/comm/shm/shm_copy.cc
#include "comm/shm/shm_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "comm/shm/shm_segment.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace devmesh {
namespace shm_internal {
namespace {

// Destinations less than this far past the source, modulo 4 KiB, take the
// backward loop (the measured slow distances were 16 and 48).
constexpr uintptr_t kAliasWindow = 64;
// glibc copies with `rep movsb` from about 2 KiB up to a size between 256
// KiB and 384 KiB (measured: at distance 16, 1.3-1.8 GB/s to 256 KiB, 25-35
// GB/s from 384 KiB, like the loop); from 1 MiB memcpy keeps its own wider
// and non-temporal paths.
constexpr size_t kLoopMinBytes = 2048;
constexpr size_t kLoopMaxBytes = size_t{1} << 20;

#if defined(__SSE2__)
void CopyBackward(char* dst, const char* src, size_t bytes) {
  size_t i = bytes;
  while (i >= 64) {
    i -= 64;
    const __m128i a =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst, src, i);
}
#endif

}  // namespace

void StreamBytes(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Up to the destination's first 16-byte boundary with a plain copy.
  const size_t head = std::min(
      bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & size_t{15});
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, bytes - i);
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

void CopyBytes(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) -
                              reinterpret_cast<uintptr_t>(src)) &
                             (kPageBytes - 1);
  if (bytes >= kLoopMinBytes && bytes < kLoopMaxBytes && distance != 0 &&
      distance < kAliasWindow) {
    CopyBackward(static_cast<char*>(dst), static_cast<const char*>(src),
                 bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace shm_internal
}  // namespace devmesh
