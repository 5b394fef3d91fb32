// devmesh/comm/nccl/nccl_option_fields.cc
#include "comm/nccl/nccl_option_fields.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace devmesh {
namespace {

OptionField Number(const char* name, int value) {
  OptionField f;
  f.name = name;
  f.number = value;
  return f;
}

OptionField Text(const char* name, const std::string& value) {
  OptionField f;
  f.name = name;
  f.is_text = true;
  f.text = value;
  return f;
}

}  // namespace

std::vector<OptionField> NcclAgreedFields(const NcclOptions& options) {
  return {Number("blocking", options.blocking),
          Number("split_share", options.split_share),
          Number("cga_cluster_size", options.cga_cluster_size),
          Number("min_ctas", options.min_ctas),
          Number("max_ctas", options.max_ctas),
          Text("net_name", options.net_name)};
}

absl::StatusOr<NcclOptions> NcclOptionsFromAgreedFields(
    absl::Span<const OptionField> fields) {
  const std::vector<OptionField> want = NcclAgreedFields(NcclOptions());
  if (fields.size() != want.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL options: ", fields.size(), " fields, expected ",
                     want.size()));
  }
  std::vector<int> numbers;
  std::string net_name;
  for (size_t i = 0; i < want.size(); ++i) {
    const OptionField& f = fields[i];
    if (f.name != want[i].name || f.is_text != want[i].is_text) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL options: field ", i, " is '", f.name,
                       f.is_text ? "' (text)" : "' (number)", ", expected '",
                       want[i].name,
                       want[i].is_text ? "' (text)" : "' (number)"));
    }
    if (f.is_text) {
      net_name = f.text;
      continue;
    }
    if (f.number < std::numeric_limits<int>::min() ||
        f.number > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL options: ", f.name, " = ", f.number,
                       " is outside int's range"));
    }
    numbers.push_back(static_cast<int>(f.number));
  }
  NcclOptions out;
  out.blocking = numbers[0];
  out.split_share = numbers[1];
  out.cga_cluster_size = numbers[2];
  out.min_ctas = numbers[3];
  out.max_ctas = numbers[4];
  out.net_name = net_name;
  return out;
}

std::string NcclLocalFieldsString(const NcclOptions& options) {
  return absl::StrCat(
      "stream=", absl::Hex(reinterpret_cast<uintptr_t>(options.stream)),
      ", synchronize=", options.synchronize,
      ", cuda_device=", options.cuda_device);
}

}  // namespace devmesh
