#include "device_mesh/mesh_stack.h"

#include <vector>

namespace devmesh {
namespace {

std::vector<DeviceMesh>& Stack() {
  thread_local std::vector<DeviceMesh> stack;
  return stack;
}

}  // namespace

ScopedMesh::ScopedMesh(const DeviceMesh& mesh) { Stack().push_back(mesh); }

ScopedMesh::~ScopedMesh() { Stack().pop_back(); }

std::optional<DeviceMesh> CurrentMesh() {
  if (Stack().empty()) return std::nullopt;
  return Stack().back();
}

int MeshStackDepth() { return static_cast<int>(Stack().size()); }

}  // namespace devmesh
