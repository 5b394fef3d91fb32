#include "device_mesh/mesh_serialization.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/option_fields.h"
#include "comm/registry.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

constexpr absl::string_view kMagic = "DMESH";
// Version 2 adds each GroupOptions' NCCL config; version 3 each one's
// verify_calls (a byte after its timeout: 0 unset, 1 false, 2 true),
// written only when some GroupOptions sets it, so that every other mesh
// keeps version 2's bytes. Versions 1 and 2 are still read.
constexpr uint8_t kVersion = 3;
constexpr uint8_t kVersionWithoutVerify = 2;

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutBytes(std::string* out, absl::string_view bytes) {
  PutU64(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}
void PutTimeout(std::string* out, const std::optional<absl::Duration>& t) {
  out->push_back(t.has_value() ? 1 : 0);
  PutU64(out, t.has_value() ? static_cast<uint64_t>(
                                  absl::ToInt64Nanoseconds(*t))
                            : 0);
}

// Reads fields off the front of the bytes; every read checks the length.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool U64(uint64_t* v) {
    if (rest_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) {
      *v |= static_cast<uint64_t>(static_cast<uint8_t>(rest_[i])) << (8 * i);
    }
    rest_.remove_prefix(8);
    return true;
  }
  bool U8(uint8_t* v) {
    if (rest_.empty()) return false;
    *v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return true;
  }
  bool Bytes(std::string* out) {
    uint64_t n;
    if (!U64(&n) || n > rest_.size()) return false;
    out->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  bool Timeout(std::optional<absl::Duration>* t) {
    uint8_t has;
    uint64_t ns;
    if (!U8(&has) || has > 1 || !U64(&ns)) return false;
    if (has) {
      *t = absl::Nanoseconds(static_cast<int64_t>(ns));
    } else {
      t->reset();
    }
    return true;
  }
  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

void PutGroupOptions(std::string* out, uint8_t version,
                     const GroupOptions& g) {
  PutBytes(out, g.backend);
  PutTimeout(out, g.timeout);
  if (version >= 3) {
    out->push_back(static_cast<char>(
        g.verify_calls.has_value() ? (*g.verify_calls ? 2 : 1) : 0));
  }
  // Each typed backend option (device_mesh_internal::TypedOptionsOf's
  // order; version 2 has one, NCCL's): a byte, set or not, then when set
  // its backend's agreed fields in their order (comm/backend_options.h):
  // numbers as 64-bit two's complement, texts with their length.
  for (const device_mesh_internal::TypedBackendOptions& t :
       device_mesh_internal::TypedOptionsOf(g)) {
    out->push_back(t.set ? 1 : 0);
    if (!t.set) continue;
    for (const OptionField& f : AgreedOptionFields(t.backend, t.options)) {
      if (f.is_text) {
        PutBytes(out, f.text);
      } else {
        PutU64(out, static_cast<uint64_t>(f.number));
      }
    }
  }
}
bool ReadGroupOptions(Reader* r, uint8_t version, GroupOptions* g) {
  if (!r->Bytes(&g->backend) || !r->Timeout(&g->timeout)) return false;
  if (version < 2) return true;
  if (version >= 3) {
    uint8_t verify;
    if (!r->U8(&verify) || verify > 2) return false;
    if (verify == 0) {
      g->verify_calls.reset();
    } else {
      g->verify_calls = verify == 2;
    }
  }
  for (const device_mesh_internal::TypedBackendOptions& t :
       device_mesh_internal::TypedOptionsOf(GroupOptions())) {
    uint8_t has;
    if (!r->U8(&has) || has > 1) return false;
    if (!has) continue;
    // Read as the backend's agreed fields are listed (names and kinds),
    // then checked and set by its codec; its local fields keep their
    // defaults.
    std::vector<OptionField> fields =
        AgreedOptionFields(t.backend, CommOptions());
    for (OptionField& f : fields) {
      if (f.is_text) {
        if (!r->Bytes(&f.text)) return false;
      } else {
        uint64_t u;
        if (!r->U64(&u)) return false;
        f.number = static_cast<int64_t>(u);
      }
    }
    CommOptions options;
    if (!SetAgreedOptionFields(t.backend, fields, &options).ok() ||
        !device_mesh_internal::SetTypedOptions(t.backend, options, g).ok()) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string SerializeMesh(absl::string_view device_type,
                          const MeshLayout& layout,
                          const MeshOptions& options) {
  bool any_verify = options.all.verify_calls.has_value();
  for (const auto& [name, g] : options.per_dim) {
    any_verify = any_verify || g.verify_calls.has_value();
  }
  const uint8_t version = any_verify ? kVersion : kVersionWithoutVerify;
  std::string out(kMagic);
  out.push_back(static_cast<char>(version));
  PutBytes(&out, device_type);
  PutBytes(&out, layout.Serialize());
  PutGroupOptions(&out, version, options.all);
  std::vector<std::string> names;
  for (const auto& [name, unused] : options.per_dim) names.push_back(name);
  std::sort(names.begin(), names.end());
  PutU64(&out, names.size());
  for (const std::string& name : names) {
    PutBytes(&out, name);
    PutGroupOptions(&out, version, options.per_dim.at(name));
  }
  return out;
}

absl::StatusOr<MeshParts> DeserializeMesh(absl::string_view bytes) {
  if (bytes.size() < kMagic.size() + 1 ||
      bytes.substr(0, kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError(
        "not a serialized DeviceMesh: the bytes do not start with \"DMESH\"");
  }
  const uint8_t version = static_cast<uint8_t>(bytes[kMagic.size()]);
  if (version < 1 || version > kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("serialized DeviceMesh version ", version,
                     " is not supported (this build reads versions 1 to ",
                     kVersion, ")"));
  }
  Reader r(bytes.substr(kMagic.size() + 1));
  std::string device_type, layout_bytes;
  MeshOptions options;
  uint64_t count = 0;
  bool ok = r.Bytes(&device_type) && r.Bytes(&layout_bytes) &&
            ReadGroupOptions(&r, version, &options.all) && r.U64(&count);
  for (uint64_t i = 0; ok && i < count; ++i) {
    std::string name;
    GroupOptions g;
    ok = r.Bytes(&name) && ReadGroupOptions(&r, version, &g);
    if (ok) options.per_dim[name] = std::move(g);
  }
  if (!ok || !r.done()) {
    return absl::InvalidArgumentError(
        "serialized DeviceMesh is truncated or has trailing bytes");
  }
  DEVMESH_ASSIGN_OR_RETURN(auto layout, MeshLayout::Deserialize(layout_bytes));
  return MeshParts{std::move(device_type), std::move(layout),
                   std::move(options)};
}

}  // namespace devmesh
