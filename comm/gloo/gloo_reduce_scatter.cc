// devmesh/comm/gloo/gloo_reduce_scatter.cc
#include "comm/gloo/gloo_reduce_scatter.h"

#include <vector>

#include "gloo/common/error.h"
#include "gloo/transport/unbound_buffer.h"

namespace devmesh {
namespace gloo_internal {

void RingReduceScatter(const std::shared_ptr<::gloo::Context>& context,
                       char* work, size_t block_elems, size_t block_bytes,
                       const reduce_internal::ReduceFunc& reduce, uint64_t slot,
                       std::chrono::milliseconds timeout) {
  const int n = context->size;
  const int r = context->rank;
  if (n == 1 || block_bytes == 0) return;
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  std::vector<char> incoming(block_bytes);
  auto send_buf = context->createUnboundBuffer(work, block_bytes * n);
  auto recv_buf = context->createUnboundBuffer(incoming.data(), block_bytes);
  // Step s sends block (r - s - 1) and receives block (r - s - 2), so that the
  // last step (s = n - 2) receives block r with every other rank's share.
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = ((r - s - 1) % n + n) % n;
    const int recv_block = ((r - s - 2) % n + n) % n;
    send_buf->send(right, slot, send_block * block_bytes, block_bytes);
    recv_buf->recv(left, slot);
    if (!recv_buf->waitRecv(timeout)) {
      GLOO_THROW_IO_EXCEPTION("reduce_scatter receive aborted");
    }
    char* target = work + recv_block * block_bytes;
    reduce(target, target, incoming.data(), block_elems);
    if (!send_buf->waitSend(timeout)) {
      GLOO_THROW_IO_EXCEPTION("reduce_scatter send aborted");
    }
  }
}

}  // namespace gloo_internal
}  // namespace devmesh
