// devmesh/comm/nccl/nccl_stream.h
// -----------------------------------------------------------------------------
// NcclStreamScope: the CUDA stream of the NCCL calls a thread makes, per
// call (PyTorch's `with torch.cuda.stream(s):`). While a scope lives, every
// NCCL collective, Send, Recv, Barrier and I* call that this thread makes,
// on any NCCL communicator (mesh groups included), is enqueued on its
// stream instead of the communicator's own (NcclOptions::stream, or the
// stream the communicator made):
//
//   {
//     devmesh::NcclStreamScope on_comm_stream(comm_stream);
//     devmesh::Work w = tp->IAllReduce(grads, grads, n, kFloat32, kSum);
//     ...                                   // compute on another stream
//     DEVMESH_RETURN_IF_ERROR(w.Wait());    // the all-reduce has ended
//   }
//
// The stream must belong to the communicator's CUDA device and outlive the
// work enqueued on it. Scopes nest (the innermost wins); nullptr selects
// the communicator's own stream. Calls on different streams are not
// ordered with each other: order them with CUDA events, or wait for their
// Works. CPU backends ignore the scope. This header needs no CUDA
// (CUstream_st* is cudaStream_t) and exists in builds without NCCL.
//
// Thread-safety: the scope is the calling thread's; make and destroy it on
// that thread, in nested order.
#ifndef DEVMESH_COMM_NCCL_NCCL_STREAM_H_
#define DEVMESH_COMM_NCCL_NCCL_STREAM_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace devmesh {

class NcclStreamScope {
 public:
  explicit NcclStreamScope(CUstream_st* stream);
  ~NcclStreamScope();
  NcclStreamScope(const NcclStreamScope&) = delete;
  NcclStreamScope& operator=(const NcclStreamScope&) = delete;

  // The innermost live scope's stream on this thread; nullptr when none.
  static CUstream_st* Current();

 private:
  CUstream_st* previous_;
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_STREAM_H_
