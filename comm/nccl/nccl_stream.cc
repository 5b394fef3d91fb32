// devmesh/comm/nccl/nccl_stream.cc
// NcclStreamScope (comm/nccl/nccl_stream.h): a thread-local stream.
#include "comm/nccl/nccl_stream.h"

namespace devmesh {
namespace {

thread_local CUstream_st* current_stream = nullptr;

}  // namespace

NcclStreamScope::NcclStreamScope(CUstream_st* stream)
    : previous_(current_stream) {
  current_stream = stream;
}

NcclStreamScope::~NcclStreamScope() { current_stream = previous_; }

CUstream_st* NcclStreamScope::Current() { return current_stream; }

}  // namespace devmesh
