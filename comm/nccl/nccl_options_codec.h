// devmesh/comm/nccl/nccl_options_codec.h
// -----------------------------------------------------------------------------
// Backend "nccl"'s option codec (comm/backend_options.h), registered with
// its factory (builtin_backends.cc): CommOptions::nccl's agreed fields as
// NcclAgreedFields lists them (comm/nccl/nccl_option_fields.h), its local
// fields as NcclLocalFieldsString writes them, cuda_device's default
// (local_rank % the visible devices, when unset) and UseLocalCudaDevice as
// the thread's set-up; it reads NcclOptions (typed_options).
//
// Internal to //comm. Thread-safety: a pure function; the codec's
// functions may be called from any thread.
#ifndef DEVMESH_COMM_NCCL_NCCL_OPTIONS_CODEC_H_
#define DEVMESH_COMM_NCCL_NCCL_OPTIONS_CODEC_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include "comm/backend_options.h"

namespace devmesh {
namespace nccl_internal {

// The codec. Its functions' errors:
//   set_agreed_fields    InvalidArgument as NcclOptionsFromAgreedFields
//   fill_local_defaults  Unavailable as CudaDeviceCount (only when
//                        cuda_device is unset)
//   prepare_thread       UseLocalCudaDevice's
BackendOptionsCodec NcclOptionsCodec();

}  // namespace nccl_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_OPTIONS_CODEC_H_
