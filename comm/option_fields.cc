// devmesh/comm/option_fields.cc
#include "comm/option_fields.h"

#include "absl/strings/str_cat.h"

namespace devmesh {

std::string OptionFieldsString(absl::Span<const OptionField> fields) {
  std::string out;
  for (const OptionField& f : fields) {
    if (!out.empty()) out += ", ";
    if (f.is_text) {
      absl::StrAppend(&out, f.name, "='", f.text, "'");
    } else {
      absl::StrAppend(&out, f.name, "=", f.number);
    }
  }
  return out;
}

std::string OptionFieldValues(absl::Span<const OptionField> fields) {
  std::string out;
  for (const OptionField& f : fields) {
    if (!out.empty()) out += ",";
    if (f.is_text) {
      out += f.text;
    } else {
      absl::StrAppend(&out, f.number);
    }
  }
  return out;
}

}  // namespace devmesh
