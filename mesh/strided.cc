// devmesh/mesh/strided.cc: mode algebra (see strided.h).
#include "mesh/strided.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace devmesh {
namespace mesh_internal {

bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > kMaxNumel / a) return false;
  *out = a * b;
  return true;
}

Modes Canonicalize(absl::Span<const Mode> modes) {
  Modes out;
  for (const Mode& m : modes) {
    if (m.size == 1) continue;
    out.push_back(m);
  }
  // Merge from the inside out: (s1:t1, s2:t2) with t1 == s2*t2 -> (s1*s2:t2).
  Modes merged;
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    if (!merged.empty()) {
      Mode& inner = merged.back();
      if (it->stride == inner.size * inner.stride) {
        inner.size *= it->size;
        continue;
      }
    }
    merged.push_back(*it);
  }
  std::reverse(merged.begin(), merged.end());
  return merged;
}

int64_t ModesSize(absl::Span<const Mode> modes) {
  int64_t n = 1;
  for (const Mode& m : modes) n *= m.size;
  return n;
}

int64_t ComposeCoord(absl::Span<const Mode> modes, int64_t c) {
  int64_t pos = 0;
  for (size_t i = modes.size(); i-- > 0;) {
    pos += (c % modes[i].size) * modes[i].stride;
    c /= modes[i].size;
  }
  return pos;
}

int64_t DecomposePosition(absl::Span<const Mode> modes, int64_t p,
                          int64_t* contribution) {
  int64_t c = 0;
  int64_t contrib = 0;
  for (const Mode& m : modes) {
    const int64_t digit = (p / m.stride) % m.size;
    c = c * m.size + digit;
    contrib += digit * m.stride;
  }
  *contribution = contrib;
  return c;
}

std::string ModesString(absl::Span<const Mode> modes) {
  if (modes.empty()) return "(1:0)";
  return absl::StrCat(
      "(",
      absl::StrJoin(modes, ",",
                    [](std::string* out, const Mode& m) {
                      absl::StrAppend(out, m.size, ":", m.stride);
                    }),
      ")");
}

absl::StatusOr<std::vector<Modes>> SplitModes(absl::Span<const Mode> modes,
                                              absl::Span<const int64_t> sizes) {
  std::vector<Modes> pieces(sizes.size());
  // Walk both lists from the innermost end.
  int mi = static_cast<int>(modes.size()) - 1;
  Mode cur = mi >= 0 ? modes[mi] : Mode{1, 0};
  for (int si = static_cast<int>(sizes.size()) - 1; si >= 0; --si) {
    int64_t need = sizes[si];
    Modes piece;  // inner first while building
    while (need > 1) {
      while (cur.size == 1 && mi > 0) cur = modes[--mi];
      if (cur.size == 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot split modes ", ModesString(modes), " into sizes (",
            absl::StrJoin(sizes, ","), "): sizes exceed the modes"));
      }
      if (need % cur.size == 0) {
        piece.push_back(cur);
        need /= cur.size;
        cur.size = 1;
      } else if (cur.size % need == 0) {
        piece.push_back(Mode{need, cur.stride});
        cur = Mode{cur.size / need, cur.stride * need};
        need = 1;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot split modes ", ModesString(modes), " into sizes (",
            absl::StrJoin(sizes, ","), "): size ", sizes[si],
            " cuts mode ", cur.size, ":", cur.stride,
            " at a point that is not a divisor, so the piece is not strided"));
      }
    }
    std::reverse(piece.begin(), piece.end());
    pieces[si] = Canonicalize(piece);
  }
  return pieces;
}

absl::Status CheckModesInRoot(absl::Span<const Mode> all_modes, int64_t offset,
                              int64_t numel) {
  if (offset < 0 || offset >= numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offset ", offset, " is outside the root's positions [0, ", numel, ")"));
  }
  Modes sorted(all_modes.begin(), all_modes.end());
  std::sort(sorted.begin(), sorted.end(), [](const Mode& a, const Mode& b) {
    return a.stride < b.stride;
  });
  int64_t reach = 1;  // every stride must be a multiple of this
  for (const Mode& m : sorted) {
    if (m.size < 2 || m.stride < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mode ", m.size, ":", m.stride,
          " is not canonical (size must be >= 2 and stride >= 1)"));
    }
    int64_t span = 0;
    if (m.stride % reach != 0 || !CheckedMul(m.size, m.stride, &span) ||
        numel % span != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mode ", m.size, ":", m.stride, " of modes ", ModesString(all_modes),
          " is not a disjoint sub-mode of the root's row-major space of ",
          numel, " positions"));
    }
    if ((offset / m.stride) % m.size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "offset ", offset, " has a non-zero digit in mode ", m.size, ":",
          m.stride));
    }
    reach = span;
  }
  return absl::OkStatus();
}

}  // namespace mesh_internal
}  // namespace devmesh
