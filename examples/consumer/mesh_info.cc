// Prints the groups of a mesh shape: bazel run //:mesh_info -- 2 4
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mesh/mesh_layout.h"

int main(int argc, char** argv) {
  std::vector<int64_t> shape;
  for (int i = 1; i < argc; ++i) shape.push_back(std::atoll(argv[i]));
  if (shape.empty()) shape = {2, 4};
  auto layout = devmesh::MeshLayout::FromShape(shape);
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", layout.status().ToString().c_str());
    return 2;
  }
  std::printf("%s  %s\n", layout->ToString("cpu").c_str(),
              layout->LayoutString().c_str());
  for (int d = 0; d < layout->ndim(); ++d) {
    auto group = layout->GroupOf(0, d);
    std::printf("dim %d: %lld groups; rank 0's group:", d,
                static_cast<long long>(*layout->NumGroups(d)));
    for (int64_t r : *group) std::printf(" %lld", static_cast<long long>(r));
    std::printf("\n");
  }
  return 0;
}
