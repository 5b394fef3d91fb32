// devmesh/device_mesh/mesh_stack.h
// -----------------------------------------------------------------------------
// R13 (docs/BEHAVIOURS.md): a per-thread stack of current meshes (the
// reference Python DeviceMesh's and PyTorch's `with mesh:`).
//
//   {
//     ScopedMesh scope(mesh);          // push
//     CurrentMesh();                   // -> mesh
//   }                                  // pop
//
// Thread-safety: each thread has its own stack; a ScopedMesh must be
// destroyed on the thread that made it, in LIFO order (RAII guarantees both
// for block-scoped guards).
#ifndef DEVMESH_DEVICE_MESH_MESH_STACK_H_
#define DEVMESH_DEVICE_MESH_MESH_STACK_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <optional>

#include "device_mesh/device_mesh.h"

namespace devmesh {

class ScopedMesh {
 public:
  explicit ScopedMesh(const DeviceMesh& mesh);
  ~ScopedMesh();
  ScopedMesh(const ScopedMesh&) = delete;
  ScopedMesh& operator=(const ScopedMesh&) = delete;
};

// The innermost mesh entered on this thread; nullopt when none.
std::optional<DeviceMesh> CurrentMesh();

// How many meshes this thread has entered and not left.
int MeshStackDepth();

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_STACK_H_
