// devmesh/tests/mesh/reference_mesh.cc
#include "tests/mesh/reference_mesh.h"

namespace devmesh {
namespace testing {

std::vector<int64_t> RefMesh::CoordOf(int64_t index) const {
  std::vector<int64_t> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = index % shape[i];
    index /= shape[i];
  }
  return c;
}

int64_t RefMesh::IndexOf(const std::vector<int64_t>& coord) const {
  int64_t index = 0;
  for (size_t i = 0; i < shape.size(); ++i) index = index * shape[i] + coord[i];
  return index;
}

RefMesh RefMesh::Slice(const std::vector<int>& dims,
                       const std::vector<int64_t>& coord) const {
  RefMesh out;
  for (int d : dims) out.shape.push_back(shape[d]);
  int64_t n = 1;
  for (int64_t s : out.shape) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> sub = out.CoordOf(i);
    std::vector<int64_t> full = coord;
    for (size_t k = 0; k < dims.size(); ++k) full[dims[k]] = sub[k];
    out.ranks.push_back(ranks[IndexOf(full)]);
  }
  return out;
}

RefMesh RefMesh::Transpose(const std::vector<int>& perm) const {
  std::vector<int64_t> zero(shape.size(), 0);
  return Slice(perm, zero);
}

std::vector<int64_t> RefMesh::Line(const std::vector<int64_t>& coord,
                                   int dim) const {
  std::vector<int64_t> out;
  std::vector<int64_t> c = coord;
  for (int64_t k = 0; k < shape[dim]; ++k) {
    c[dim] = k;
    out.push_back(ranks[IndexOf(c)]);
  }
  return out;
}

AtomMesh AtomMesh::Root(std::vector<int64_t> root_shape,
                        std::vector<std::string> names) {
  AtomMesh m;
  m.root_shape = std::move(root_shape);
  m.base.assign(m.root_shape.size(), 0);
  for (size_t r = 0; r < m.root_shape.size(); ++r) {
    m.dims.push_back(m.root_shape[r] > 1 ? std::vector<int>{static_cast<int>(r)}
                                         : std::vector<int>{});
  }
  m.names = std::move(names);
  return m;
}

std::vector<int64_t> AtomMesh::Shape() const {
  std::vector<int64_t> out;
  for (const auto& atoms : dims) {
    int64_t n = 1;
    for (int r : atoms) n *= root_shape[r];
    out.push_back(n);
  }
  return out;
}

std::vector<int64_t> AtomMesh::Ranks() const {
  // All atoms, dim by dim, outer first: the mesh's row-major order.
  std::vector<int> atoms;
  for (const auto& d : dims) atoms.insert(atoms.end(), d.begin(), d.end());
  int64_t numel = 1;
  for (int r : atoms) numel *= root_shape[r];
  std::vector<int64_t> out;
  for (int64_t i = 0; i < numel; ++i) {
    std::vector<int64_t> coord = base;
    int64_t rest = i;
    for (size_t k = atoms.size(); k-- > 0;) {
      coord[atoms[k]] = rest % root_shape[atoms[k]];
      rest /= root_shape[atoms[k]];
    }
    int64_t rank = 0;
    for (size_t r = 0; r < root_shape.size(); ++r) {
      rank = rank * root_shape[r] + coord[r];
    }
    out.push_back(rank);
  }
  return out;
}

std::vector<int64_t> AtomMesh::RootCoord(int64_t rank) const {
  std::vector<int64_t> coord(root_shape.size());
  for (size_t r = root_shape.size(); r-- > 0;) {
    coord[r] = rank % root_shape[r];
    rank /= root_shape[r];
  }
  return coord;
}

std::vector<int> AtomMesh::Walked() const {
  std::vector<int> out;
  for (const auto& d : dims) out.insert(out.end(), d.begin(), d.end());
  return out;
}

AtomMesh AtomMesh::Select(
    const std::vector<int64_t>& root_shape,
    const std::vector<std::pair<std::vector<int>, std::string>>& chosen,
    int64_t rank) {
  AtomMesh m;
  m.root_shape = root_shape;
  m.base = m.RootCoord(rank);
  for (const auto& [atoms, name] : chosen) {
    m.dims.push_back(atoms);
    m.names.push_back(name);
  }
  return m;
}

}  // namespace testing
}  // namespace devmesh
