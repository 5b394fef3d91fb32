// devmesh/comm/shm/shm_segment.h
// -----------------------------------------------------------------------------
// The shared-memory segment of one group, and its layout.
//
// A segment is a POSIX shared-memory object (shm_open under /dev/shm) that
// group rank 0 creates with a random name, reserves with posix_fallocate (so
// that a full /dev/shm is an error at creation, never a SIGBUS in a
// collective). The last member to map it unlinks the name (the header's
// `mapped` count; rank 0 does when some member could not map it): a SIGKILL
// of every rank from then on leaves nothing in /dev/shm. The mapping
// lives as long as the ShmSegment object.
//
// Layout (all offsets multiples of 64 bytes, the cache line):
//
//   SegmentHeader                       magic, nonce, size, slot bytes
//   SyncLine                            arrivals, bell, sleepers, aborted_by
//   MemberLine x size                   per member: step, state, identity;
//                                       its last two calls' records
//   (pad to 4096)
//   data: slot(parity, member) x 2 x size, each slot_bytes long
//
// Memory per member: 2 x slot_bytes (kDefaultSlotBytes: 256 KiB each, so
// 512 KiB a member) plus 128 bytes of control. Messages larger than a slot go
// through it in rounds (shm_algorithms.h).
//
// Thread-safety: ShmSegment is immutable after Create/Open; the atomics in
// the layout are shared by every member process.
#ifndef DEVMESH_COMM_SHM_SHM_SEGMENT_H_
#define DEVMESH_COMM_SHM_SHM_SEGMENT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {
namespace shm_internal {

inline constexpr size_t kCacheLine = 64;
// Bytes of a page, and the period of the CPU's 4K aliasing (shm_copy.h).
inline constexpr size_t kPageBytes = 4096;
// "DMSHMSG2" read as a little-endian word (2: member lines of two cache
// lines, with the call records).
inline constexpr uint64_t kSegmentMagic = 0x3247534D48534D44ULL;

// Bytes per member per parity (the sweep that chose it:
// docs/design_figures.md). DEVMESH_SHM_SLOT_BYTES overrides it (the same on
// every member).
inline constexpr size_t kDefaultSlotBytes = size_t{256} << 10;

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint64_t nonce;  // random, written by rank 0, checked by every member
  uint64_t size;   // members
  uint64_t slot_bytes;
  uint64_t data_offset;
  uint64_t total_bytes;
  // Members that have mapped the segment (the creator is the first): the
  // set-up's member that brings it to `size` removes the name from /dev/shm
  // (shm_setup.cc, step 3), so that from then on nothing can be left there.
  std::atomic<uint32_t> mapped;
  // 1: the group compares its members' calls (shm_sync.h: BeginCall), the
  // default; 0: it does not. Written by rank 0 before it offers the segment
  // (ShmOptions::check_calls), so that every member does the same.
  uint32_t check_calls;
};

// The one word every member sleeps on, and what wakes it.
struct alignas(kCacheLine) SyncLine {
  // Total arrivals: after every member arrived at step s it is size * s
  // (mod 2^32).
  std::atomic<uint32_t> arrivals;
  // Futex word: bumped by the last arrival of a step, by Abort and by a
  // member leaving, so a sleeper never misses a wake-up.
  std::atomic<uint32_t> bell;
  // Members inside (or about to enter) a futex wait on `bell`.
  std::atomic<uint32_t> sleepers;
  // Group rank + 1 of the member that aborted the group; 0 while none has.
  std::atomic<uint32_t> aborted_by;
  // Group rank + 1 of the first member found dead; 0 while none has been.
  // Every member's errors name it, whoever found it, and whatever else
  // (members leaving after their own error) happened since.
  std::atomic<uint32_t> dead_member;
};

enum MemberState : uint32_t {
  kMemberJoining = 0,
  kMemberMapped = 1,
  kMemberLeft = 2,
};

// A member's collective for the per-call check (comm/call_check.h), as
// plain data: written by its member before the call's first arrival, read by
// every member after that step.
struct CallSlot {
  int64_t seq;     // CallRecord::seq; 0 before the first call
  uint64_t count;  // CallRecord::count
  uint32_t what;   // kind | dtype << 8 | op << 16
  int32_t root;    // CallRecord::root
};

struct alignas(kCacheLine) MemberLine {
  std::atomic<uint32_t> step;   // the last step this member arrived at
  std::atomic<uint32_t> state;  // MemberState
  int64_t pid;                  // in the pid namespace of every member
  uint64_t start_time;          // /proc/<pid>/stat field 22
  uint64_t nonce_echo;          // the header's nonce, as this member read it
  // The single-copy path (shm_algorithms.h): the address, in this member's
  // own address space, of its mapping's header nonce (the set-up's
  // process_vm_readv probe), and of the current all-reduce's buffers
  // (written before the call's first step, read by peers after it).
  uint64_t probe_addr;
  uint64_t send_addr;
  uint64_t recv_addr;
  // Written before the single-copy call's last step: step A's number << 32,
  // with bit 31 set when one of this member's reads failed (bit 30: the
  // member read was gone; bits 0-29: that member's group rank). After the
  // last step every member reads every other's, so that all fail alike.
  // Before that, at set-up, it holds this member's verdict on the others
  // (shm_setup.cc, step 6).
  std::atomic<uint64_t> read_result;
  // Second cache line: the records of this member's last two checked calls
  // (shm_sync.h: BeginCall), by the parity of their count. A member writes
  // call[k & 1] for its k-th checked call only after every member arrived
  // at the first step of its (k-1)-th, which each does only after it
  // finished its (k-2)-th, the reading of the records included.
  alignas(kCacheLine) CallSlot call[2];
};
static_assert(sizeof(MemberLine) == 2 * kCacheLine, "two cache lines a member");

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free (address-free)");
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free (address-free)");

// Bytes of a segment for `size` members with `slot_bytes` slots; 0 when that
// overflows.
size_t SegmentBytes(size_t size, size_t slot_bytes);

class ShmSegment {
 public:
  // Creates, reserves and maps a new segment named `name` ("/devmesh-..."),
  // initialising its header (magic, `nonce`, size, slot bytes), its sync line
  // and every member line (joining). Errors: InvalidArgument for size < 1 or
  // a slot size that is not a positive multiple of 64 or overflows;
  // ResourceExhausted when /dev/shm has not room for the segment (naming the
  // bytes); Internal for any other shm_open / mmap failure (naming errno).
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(
      const std::string& name, size_t size, size_t slot_bytes, uint64_t nonce);
  // Maps an existing segment and checks that it is the one offered: its byte
  // count, magic, nonce, size and slot bytes. Errors: NotFound when no
  // segment has that name here (another host, or another /dev/shm);
  // FailedPrecondition when it exists but does not match (naming the field);
  // Internal for other system errors.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Open(
      const std::string& name, size_t size, size_t slot_bytes, uint64_t nonce);
  // Removes `name` from /dev/shm (mappings stay valid). OK when it is gone
  // already.
  static absl::Status Unlink(const std::string& name);

  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  SyncLine* sync() const {
    return reinterpret_cast<SyncLine*>(static_cast<char*>(base_) +
                                       sizeof(SegmentHeader));
  }
  MemberLine* member(size_t i) const {
    return reinterpret_cast<MemberLine*>(static_cast<char*>(base_) +
                                         sizeof(SegmentHeader) +
                                         sizeof(SyncLine)) +
           i;
  }
  // Slot of member `i` for rounds of parity `parity` (0 or 1).
  char* slot(int parity, size_t i) const {
    return static_cast<char*>(base_) + data_offset_ +
           (static_cast<size_t>(parity) * size_ + i) * slot_bytes_;
  }
  size_t size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t bytes() const { return bytes_; }

 private:
  ShmSegment(void* base, size_t bytes, size_t size, size_t slot_bytes,
             size_t data_offset)
      : base_(base),
        bytes_(bytes),
        size_(size),
        slot_bytes_(slot_bytes),
        data_offset_(data_offset) {}

  void* base_;
  size_t bytes_;
  size_t size_;
  size_t slot_bytes_;
  size_t data_offset_;
};

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_SEGMENT_H_
