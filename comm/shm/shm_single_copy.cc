// devmesh/comm/shm/shm_single_copy.cc
#include "comm/shm/shm_single_copy.h"

#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/shm/shm_algorithms.h"
#include "comm/shm/shm_copy.h"
#include "status/status_macros.h"

namespace devmesh {
namespace shm_internal {
namespace {

using reduce_internal::ReduceFunc;

// Bytes of each block of the reduce-scatter: three such buffers (two peers'
// blocks and, in place, this member's own) stay in L2 with the output.
constexpr size_t kBlockBytes = size_t{64} << 10;

// Reads `bytes` at `remote` in member `j`'s address space into `local`.
// process_vm_readv may read less than asked (it stops at the first page it
// cannot read, and a call moves at most about 2 GiB): read on to the end.
absl::Status ReadPeer(ShmSync& sync, int j, uint64_t remote, char* local,
                      size_t bytes, OpName what, bool* gone) {
  size_t done = 0;
  while (done < bytes) {
    const size_t want = std::min<size_t>(bytes - done, size_t{1} << 30);
    iovec to{local + done, want};
    iovec from{reinterpret_cast<void*>(remote + done), want};
    const ssize_t got =
        process_vm_readv(static_cast<pid_t>(sync.pid(j)), &to, 1, &from, 1, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    const int err = got == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    *gone = err == ESRCH;
    return WithPeer(
        absl::UnavailableError(absl::StrCat(
            what(), ": reading the buffer of global rank ", sync.global_rank(j),
            " (pid ", sync.pid(j), ") with process_vm_readv failed: ",
            err == ESRCH ? "the process is gone" : std::strerror(err))),
        sync.global_rank(j));
  }
  return absl::OkStatus();
}

// This thread's block buffers (one collective at a time per thread).
char* Scratch(size_t bytes) {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, Free> scratch;
  thread_local size_t size = 0;
  if (size < bytes) {
    const size_t rounded =
        (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
    scratch.reset(
        static_cast<char*>(std::aligned_alloc(kPageBytes, rounded)));
    size = scratch != nullptr ? rounded : 0;
  }
  return scratch.get();
}

}  // namespace

absl::Status ShmAllReduceSingleCopy(const ShmSegment& segment, ShmSync& sync,
                                    const char* send, char* recv,
                                    size_t count, size_t elem,
                                    const ReduceFunc& reduce, OpName what) {
  const int n = sync.size();
  const int me = sync.rank();
  // This thread's block buffers, allocated before the first step. Each has
  // a page of slack: a peer's block is read to the same offset within a
  // page as it has in the peer (`aligned` below), so that the kernel's copy
  // never meets 4K aliasing (shm_copy.h; with the buffer 16 bytes into its
  // page this path was 2-3x slower than the slots at every size).
  const size_t block = std::max<size_t>(1, kBlockBytes / elem);
  const size_t stride = block * elem + kPageBytes;
  char* scratch = Scratch(3 * stride);
  if (scratch == nullptr) {
    sync.Abort();  // the peers would otherwise wait for step A
    return absl::ResourceExhaustedError(absl::StrCat(
        what(), ": could not allocate ", 3 * stride,
        " bytes of block buffers for the single-copy all-reduce"));
  }
  MemberLine* mine = segment.member(me);
  mine->send_addr = reinterpret_cast<uint64_t>(send);
  mine->recv_addr = reinterpret_cast<uint64_t>(recv);
  // A: every member's addresses are published. Its number names this call
  // in the members' read results (the same on every member).
  const uint32_t call = sync.Arrive();
  DEVMESH_RETURN_IF_ERROR(sync.WaitAll(call, what));

  // A failed read stops this member's reads but not its steps: a peer's
  // buffer goes away when that peer leaves the call on an error of its own
  // (another member died, and it found out first), and the steps then end
  // with the error that names the cause. When every step passes, a failed
  // read is announced in the member's line before the last step, and every
  // member fails the call (the failing member's part, which the others
  // copied, is incomplete).
  absl::Status read_error;
  int unread = -1;  // the member whose buffer could not be read
  bool unread_gone = false;
  auto read = [&](int j, uint64_t remote, char* local, size_t bytes) {
    if (read_error.ok()) {
      read_error = ReadPeer(sync, j, remote, local, bytes, what, &unread_gone);
      if (!read_error.ok()) unread = j;
    }
    return read_error.ok();
  };

  // Reduce-scatter: part `me`, in rank order, block by block.
  const size_t lo = PartStart(count, elem, me, n);
  const size_t hi = PartStart(count, elem, me + 1, n);
  const bool in_place = send == recv;
  char* peer_a = scratch;
  char* peer_b = scratch + stride;
  char* own_copy = scratch + 2 * stride;
  auto aligned = [](char* buffer, uint64_t remote) {
    return buffer + (remote & (kPageBytes - 1));
  };
  for (size_t off = lo; off < hi && read_error.ok(); off += block) {
    const size_t c = std::min(block, hi - off);
    const size_t at = off * elem;
    char* out = recv + at;
    // In place, `out` is this member's input: keep a copy before the first
    // reduce writes it (member `me` need not come first in rank order).
    const char* own = send + at;
    if (in_place && me != 0) {
      CopyBytes(own_copy, own, c * elem);
      own = own_copy;
    }
    auto source = [&](int j, char* buffer) -> const char* {
      if (j == me) return own;
      const uint64_t remote = segment.member(j)->send_addr + at;
      char* local = aligned(buffer, remote);
      return read(j, remote, local, c * elem) ? local : nullptr;
    };
    const char* x0 = source(0, peer_a);
    const char* x1 = source(1, peer_b);
    if (x0 == nullptr || x1 == nullptr) break;
    reduce(out, x0, x1, c);
    for (int j = 2; j < n; ++j) {
      const char* xj = source(j, peer_a);
      if (xj == nullptr) break;
      reduce(out, out, xj, c);
    }
  }
  // B: every part is reduced in its owner's recv.
  DEVMESH_RETURN_IF_ERROR(sync.Step(what));

  // All-gather: every other part straight from its owner's recv.
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    const size_t jlo = PartStart(count, elem, j, n);
    const size_t jhi = PartStart(count, elem, j + 1, n);
    if (jhi == jlo) continue;
    read(j, segment.member(j)->recv_addr + jlo * elem, recv + jlo * elem,
         (jhi - jlo) * elem);
  }
  // C: nobody's buffers are read any more; every member's read result is
  // published.
  // (call << 32) | failed bit | gone bit | member index.
  constexpr uint64_t kFailed = uint64_t{1} << 31;
  constexpr uint64_t kGone = uint64_t{1} << 30;
  const uint64_t tag = uint64_t{call} << 32;
  mine->read_result =
      read_error.ok() ? tag
                      : tag | kFailed | (unread_gone ? kGone : 0) |
                            static_cast<uint64_t>(unread);
  DEVMESH_RETURN_IF_ERROR(sync.Step(what));
  if (!read_error.ok()) {
    // Every member arrived: either the member read died right after its
    // last arrival, or left the call on another member's death that it
    // found after its last arrival (the dead member had arrived too), or
    // this member's read failed on its own (a security module that changed
    // its mind, say). Abort the group too, so that later calls fail on
    // every member; a death found is the cause, and is named.
    sync.Abort();
    DEVMESH_RETURN_IF_ERROR(sync.DeathFound(what));
    return read_error;
  }
  for (int j = 0; j < n; ++j) {
    const uint64_t r = segment.member(j)->read_result;
    if (j == me || r == tag || (r >> 32) != call || (r & kFailed) == 0) {
      continue;
    }
    // A death found is the cause of that member's failed read (see above).
    DEVMESH_RETURN_IF_ERROR(sync.DeathFound(what));
    const int of = static_cast<int>(r & (kGone - 1));
    absl::Status failed = absl::UnavailableError(absl::StrCat(
        what(), ": global rank ", sync.global_rank(j),
        " could not read the buffer of global rank ",
        of >= 0 && of < n ? sync.global_rank(of) : -1,
        (r & kGone) != 0 ? " (the process is gone)" : "",
        " with process_vm_readv, so the result is incomplete; the group is "
        "aborted"));
    return of >= 0 && of < n ? WithPeer(std::move(failed), sync.global_rank(of))
                             : failed;
  }
  return absl::OkStatus();
}

}  // namespace shm_internal
}  // namespace devmesh
