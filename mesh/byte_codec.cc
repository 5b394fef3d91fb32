// devmesh/mesh/byte_codec.cc
#include "mesh/byte_codec.h"

namespace devmesh {
namespace mesh_internal {

void ByteWriter::Varint(int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  while (u >= 0x80) {
    out_.push_back(static_cast<char>((u & 0x7f) | 0x80));
    u >>= 7;
  }
  out_.push_back(static_cast<char>(u));
}

void ByteWriter::String(absl::string_view s) {
  Varint(static_cast<int64_t>(s.size()));
  Raw(s);
}

bool ByteReader::Varint(int64_t* v) {
  uint64_t u = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in_.empty()) return false;
    const uint8_t byte = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    if (shift == 63 && byte > 1) return false;
    u |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      if (u > static_cast<uint64_t>(INT64_MAX)) return false;
      *v = static_cast<int64_t>(u);
      return true;
    }
  }
  return false;
}

bool ByteReader::Count(int64_t max, int64_t* n) {
  return Varint(n) && *n <= max && *n <= static_cast<int64_t>(in_.size());
}

bool ByteReader::String(std::string* s) {
  int64_t n = 0;
  absl::string_view raw;
  if (!Count(INT64_MAX, &n) || !Raw(static_cast<size_t>(n), &raw)) return false;
  s->assign(raw.data(), raw.size());
  return true;
}

bool ByteReader::Raw(size_t n, absl::string_view* s) {
  if (n > in_.size()) return false;
  *s = in_.substr(0, n);
  in_.remove_prefix(n);
  return true;
}

}  // namespace mesh_internal
}  // namespace devmesh
