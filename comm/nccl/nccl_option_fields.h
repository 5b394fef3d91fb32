// devmesh/comm/nccl/nccl_option_fields.h
// -----------------------------------------------------------------------------
// NcclOptions (comm/options.h) as named fields (comm/option_fields.h): the
// one place outside the NCCL backend's own code that knows its fields, so
// that device_mesh handles a group's NCCL options without naming any.
//
// Thread-safety: pure functions.
#ifndef DEVMESH_COMM_NCCL_NCCL_OPTION_FIELDS_H_
#define DEVMESH_COMM_NCCL_NCCL_OPTION_FIELDS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/option_fields.h"
#include "comm/options.h"

namespace devmesh {

// The fields every member of a group must agree on (they configure the
// communicator NCCL makes), in this fixed order: blocking, split_share,
// cga_cluster_size, min_ctas, max_ctas (numbers), net_name (text). The order
// is part of devmesh's mesh serialization: append new fields at the end.
std::vector<OptionField> NcclAgreedFields(const NcclOptions& options);

// NcclOptions from fields in NcclAgreedFields's order, names and kinds; the
// fields each member sets for itself (cuda_device, stream, synchronize)
// keep their defaults.
// Errors:
//   InvalidArgument  a different number of fields, a name or kind that
//                    differs from NcclAgreedFields's, or a number outside
//                    int's range (naming the field)
absl::StatusOr<NcclOptions> NcclOptionsFromAgreedFields(
    absl::Span<const OptionField> fields);

// The fields each member sets for itself, as text:
// "stream=7f12ab000000, synchronize=1, cuda_device=-1" (the stream's
// address in hexadecimal, "0" for none).
std::string NcclLocalFieldsString(const NcclOptions& options);

}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_OPTION_FIELDS_H_
