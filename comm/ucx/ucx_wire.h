// devmesh/comm/ucx/ucx_wire.h
// -----------------------------------------------------------------------------
// Internal to comm/ucx: what a UcxGroup puts on the wire (the 32-byte call
// header every message starts with, the notices), its tag masks, and the
// posted-operation record with UCX's completion callbacks, shared by
// ucx_group.cc (messages, waits) and ucx_group_checks.cc (the per-call
// check and the notices).
#ifndef DEVMESH_COMM_UCX_UCX_WIRE_H_
#define DEVMESH_COMM_UCX_UCX_WIRE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "comm/communicator.h"
#include "comm/ucx/ucx_group.h"

namespace devmesh {
namespace ucx_internal {

inline constexpr uint32_t kHeaderMagic = 0x444d5558;  // "DMUX"
inline constexpr uint32_t kNoticeMagic = 0x444d554e;  // "DMUN"
inline constexpr uint64_t kSenderBits = 30;
inline constexpr size_t kUnknownLength = ~size_t{0};
inline constexpr uint64_t kFullMask = ~uint64_t{0};
// Matches every sender of one (group, channel).
inline constexpr uint64_t kAnySenderMask = ~((uint64_t{1} << kSenderBits) - 1);

struct WireHeader {
  uint32_t magic = 0;
  uint8_t kind = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t unused0 = 0;
  int32_t root = -1;
  uint32_t unused1 = 0;
  int64_t seq = 0;
  uint64_t count = 0;
};
static_assert(sizeof(WireHeader) == 32, "the header is 32 bytes on the wire");

// kTruncated: first_global received a longer message from other_global
// than its call (first) expects; other is not known.
enum NoticeType : uint8_t {
  kDisagreement = 1,
  kLeft = 2,
  kStopped = 3,
  kTruncated = 4
};

struct Notice {
  uint32_t magic = kNoticeMagic;
  uint8_t type = 0;
  uint8_t unused[3] = {0, 0, 0};
  int32_t first_global = -1;  // the reference member (lower group rank)
  int32_t other_global = -1;  // the member whose call differed; the leaver
  WireHeader first;
  WireHeader other;
  char reason[160] = {};  // kStopped: the member's error, for people
};

inline WireHeader ToWire(const CallRecord& call) {
  WireHeader h;
  h.magic = kHeaderMagic;
  h.kind = static_cast<uint8_t>(call.kind);
  h.dtype = static_cast<uint8_t>(call.dtype);
  h.op = static_cast<uint8_t>(call.op);
  h.root = call.root;
  h.seq = call.seq;
  h.count = call.count;
  return h;
}

inline CallRecord FromWire(const WireHeader& h) {
  CallRecord call;
  call.kind = static_cast<CallKind>(h.kind);
  call.dtype = static_cast<DataType>(h.dtype);
  call.op = static_cast<ReduceOp>(h.op);
  call.root = h.root;
  call.seq = h.seq;
  call.count = h.count;
  return call;
}

struct UcxGroup::Op {
  bool is_send = false;
  int peer = -1;
  size_t expected = 0;  // a receive's bytes after the header
  void* request = nullptr;
  std::atomic<bool> done{false};
  ucs_status_t status = UCS_OK;
  size_t length = 0;  // a receive's bytes, header included, or kUnknownLength
  WireHeader header;
  Notice notice;  // a notice's body (the destructor's and SendNotices')
  ucp_dt_iov_t iov[2];
};

inline void SendDone(void* /*request*/, ucs_status_t status, void* user_data) {
  auto* op = static_cast<UcxGroup::Op*>(user_data);
  op->status = status;
  op->done.store(true, std::memory_order_release);
}

inline void RecvDone(void* /*request*/, ucs_status_t status,
              const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<UcxGroup::Op*>(user_data);
  op->status = status;
  if (info != nullptr) op->length = info->length;
  op->done.store(true, std::memory_order_release);
}

// Records what ucp_*_nbx returned: done at once, failed at once, or pending.
inline void Posted(UcxGroup::Op* op, ucs_status_ptr_t r) {
  if (r == nullptr) {
    op->status = UCS_OK;
    op->done.store(true, std::memory_order_relaxed);
  } else if (UCS_PTR_IS_ERR(r)) {
    op->status = UCS_PTR_STATUS(r);
    op->done.store(true, std::memory_order_relaxed);
  } else {
    op->request = r;
  }
}

}  // namespace ucx_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_UCX_UCX_WIRE_H_
