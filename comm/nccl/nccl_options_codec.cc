// devmesh/comm/nccl/nccl_options_codec.cc
#include "comm/nccl/nccl_options_codec.h"

#include <typeindex>
#include <typeinfo>
#include <utility>

#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_option_fields.h"
#include "status/status_macros.h"

namespace devmesh {
namespace nccl_internal {

BackendOptionsCodec NcclOptionsCodec() {
  BackendOptionsCodec codec;
  codec.agreed_fields = [](const CommOptions& options) {
    return NcclAgreedFields(options.nccl);
  };
  codec.set_agreed_fields = [](absl::Span<const OptionField> fields,
                               CommOptions* options) -> absl::Status {
    DEVMESH_ASSIGN_OR_RETURN(NcclOptions agreed,
                             NcclOptionsFromAgreedFields(fields));
    // The member's own fields stay as they were.
    agreed.cuda_device = options->nccl.cuda_device;
    agreed.stream = options->nccl.stream;
    agreed.synchronize = options->nccl.synchronize;
    options->nccl = std::move(agreed);
    return absl::OkStatus();
  };
  codec.local_fields = [](const CommOptions& options) {
    return NcclLocalFieldsString(options.nccl);
  };
  codec.fill_local_defaults = [](const LocalPlace& place,
                                 CommOptions* options) -> absl::Status {
    if (options->nccl.cuda_device >= 0) return absl::OkStatus();
    // One rank per GPU of the host, as UseLocalCudaDevice.
    DEVMESH_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
    options->nccl.cuda_device = place.local_rank % count;
    return absl::OkStatus();
  };
  codec.prepare_thread = [](const LocalPlace& place) {
    return UseLocalCudaDevice(place.local_rank);
  };
  codec.typed_options = std::type_index(typeid(NcclOptions));
  return codec;
}

}  // namespace nccl_internal
}  // namespace devmesh
