// devmesh/tests/comm/shm_copy_test.cc
// CopyBytes (comm/shm/shm_copy.h) copies exactly, byte for byte, at every
// distance between destination and source modulo 4 KiB that matters (the
// backward loop's window and its edges) and at sizes around its 64-byte
// steps and its 2 KiB and 1 MiB bounds, touching nothing outside the
// destination. StreamBytes (non-temporal stores) the same, and at every
// alignment of the destination to 16 bytes around its loop's 64-byte steps.
#include "comm/shm/shm_copy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <algorithm>

#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace shm_internal {
namespace {

using CopyFunc = void (*)(void*, const void*, size_t);

// Copies with `copy` at every (source offset, distance, size) given and
// checks every byte of the destination and 64 guard bytes on each side.
// Counts the copies checked in *checked.
void CheckCopies(CopyFunc copy, absl::Span<const size_t> distances,
                 absl::Span<const size_t> sizes,
                 absl::Span<const size_t> source_offsets, int* checked) {
  constexpr size_t kArena = size_t{3} << 20;
  constexpr uint8_t kGuard = 0xA5;
  // Page-aligned arenas, so that the distances below are the ones named.
  auto* src_arena = static_cast<uint8_t*>(std::aligned_alloc(4096, kArena));
  auto* dst_arena = static_cast<uint8_t*>(std::aligned_alloc(4096, kArena));
  ASSERT_NE(src_arena, nullptr);
  ASSERT_NE(dst_arena, nullptr);
  for (size_t i = 0; i < kArena; ++i) {
    src_arena[i] = static_cast<uint8_t>((i * 131 + 7) & 0xff);
  }
  *checked = 0;
  for (size_t src_off : source_offsets) {
    for (size_t distance : distances) {
      for (size_t bytes : sizes) {
        const size_t dst_off = 4096 + (src_off + distance) % 4096;
        ASSERT_LE(dst_off + bytes + 64, kArena);
        std::fill(dst_arena, dst_arena + dst_off + bytes + 64, kGuard);
        ASSERT_EQ((reinterpret_cast<uintptr_t>(dst_arena + dst_off) -
                   reinterpret_cast<uintptr_t>(src_arena + src_off)) & 4095,
                  distance);
        copy(dst_arena + dst_off, src_arena + src_off, bytes);
        for (size_t i = 0; i < bytes; ++i) {
          EXPECT_EQ(dst_arena[dst_off + i], src_arena[src_off + i])
              << "byte " << i << " of " << bytes << ", source offset "
              << src_off << ", distance " << distance;
        }
        for (size_t i = dst_off - 64; i < dst_off; ++i) {
          EXPECT_EQ(dst_arena[i], kGuard) << "wrote before the destination";
        }
        for (size_t i = dst_off + bytes; i < dst_off + bytes + 64; ++i) {
          EXPECT_EQ(dst_arena[i], kGuard) << "wrote past the destination";
        }
        ++*checked;
      }
    }
  }
  std::free(src_arena);
  std::free(dst_arena);
}

TEST(ShmCopyTest, CopiesExactlyAtEveryDistanceAndSize) {
  const size_t kDistances[] = {0, 1, 8, 15, 16, 17, 48, 63, 64, 65, 200, 4032,
                               4080, 4095};
  const size_t kSizes[] = {0,          1,    63,   64,  65, 2047, 2048, 2049,
                           4096 + 17,  (size_t{256} << 10) + 5,
                           (size_t{1} << 20) - 1, (size_t{1} << 20) + 3};
  const size_t kSourceOffsets[] = {0, 16, 4000};
  int checked = 0;
  CheckCopies(&CopyBytes, kDistances, kSizes, kSourceOffsets, &checked);
  EXPECT_EQ(checked, 3 * 14 * 12);
}

TEST(ShmCopyTest, StreamsExactlyAtEveryAlignmentAndSize) {
  // Destinations 0-15 bytes past a 16-byte boundary (the plain head), and a
  // few farther; sizes around the 64-byte loop and its tail.
  const size_t kDistances[] = {0, 1, 2, 7, 8, 9, 14, 15, 16, 17, 31, 48, 4095};
  const size_t kSizes[] = {0,  1,  14, 15, 16, 17, 63, 64, 65, 79, 80,
                           127, 128, 129, 4096 + 17, (size_t{1} << 20) + 3};
  const size_t kSourceOffsets[] = {0, 5, 16};
  int checked = 0;
  CheckCopies(&StreamBytes, kDistances, kSizes, kSourceOffsets, &checked);
  EXPECT_EQ(checked, 3 * 13 * 16);
}

}  // namespace
}  // namespace shm_internal
}  // namespace devmesh
