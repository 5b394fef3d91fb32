// devmesh/mesh/byte_codec.h
// -----------------------------------------------------------------------------
// Varint writer and bounds-checked reader for MeshLayout::Serialize
// (internal to //mesh). Every read checks the remaining length, so corrupt or
// truncated input is an error value, never a crash. Not thread-safe per
// object; plain values.
#ifndef DEVMESH_MESH_BYTE_CODEC_H_
#define DEVMESH_MESH_BYTE_CODEC_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace devmesh {
namespace mesh_internal {

class ByteWriter {
 public:
  // Non-negative values only (all of a layout's numbers are).
  void Varint(int64_t v);
  void String(absl::string_view s);
  void Raw(absl::string_view s) { out_.append(s.data(), s.size()); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(absl::string_view in) : in_(in) {}
  // False on truncation, overlong encoding or a value above INT64_MAX.
  bool Varint(int64_t* v);
  // A count that must not exceed `max` nor the bytes left (each item takes
  // at least one byte), so no huge allocation follows corrupt input.
  bool Count(int64_t max, int64_t* n);
  bool String(std::string* s);
  bool Raw(size_t n, absl::string_view* s);
  size_t remaining() const { return in_.size(); }

 private:
  absl::string_view in_;
};

}  // namespace mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_MESH_BYTE_CODEC_H_
