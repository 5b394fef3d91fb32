// Prints a layout; only here to be built without C++17 and fail clearly.
#include <cstdio>

#include "mesh/mesh_layout.h"

int main() {
  auto layout = devmesh::MeshLayout::FromShape({2, 4}, {"dp", "tp"});
  if (!layout.ok()) return 1;
  std::printf("%s\n", layout->LayoutString().c_str());
  return 0;
}
