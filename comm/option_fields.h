// devmesh/comm/option_fields.h
// -----------------------------------------------------------------------------
// A backend's options as a list of named fields, so that code outside the
// backend's package (device_mesh's group identities, option strings and mesh
// serialization) can compare, print and store them without naming a field.
// A backend says which of its fields every member must agree on and how its
// options are made back from them (comm/nccl/nccl_option_fields.h).
//
// Thread-safety: value types and pure functions.
#ifndef DEVMESH_COMM_OPTION_FIELDS_H_
#define DEVMESH_COMM_OPTION_FIELDS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace devmesh {

// One field: a number or a text, by `is_text`.
struct OptionField {
  std::string name;
  bool is_text = false;
  int64_t number = 0;  // when !is_text
  std::string text;    // when is_text
};

// "name=value, name='text', ...": numbers in decimal, texts in single
// quotes, in the list's order.
std::string OptionFieldsString(absl::Span<const OptionField> fields);

// The values alone, "1,0,-1,''" style without quotes: "1,0,-1,IB". For keys
// that only need to differ when a value does (the order and names are the
// backend's, fixed).
std::string OptionFieldValues(absl::Span<const OptionField> fields);

}  // namespace devmesh

#endif  // DEVMESH_COMM_OPTION_FIELDS_H_
