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

}  // namespace testing
}  // namespace devmesh
