// devmesh/tests/device_mesh/mesh_checks.h
// -----------------------------------------------------------------------------
// Checks run inside each rank of a multi-process test: that the group of a
// mesh dim holds exactly the ranks //mesh names for it, in mesh order, and
// that collectives over it give the exact expected values.
#ifndef DEVMESH_TESTS_DEVICE_MESH_MESH_CHECKS_H_
#define DEVMESH_TESTS_DEVICE_MESH_MESH_CHECKS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bootstrap/bootstrap.h"
#include "device_mesh/device_mesh.h"

namespace devmesh {
namespace testing {

// A runtime over the test's bootstrap (which outlives the rank's body).
absl::StatusOr<std::shared_ptr<MeshRuntime>> RuntimeOf(Bootstrap& b);

// For dim `dim` of `mesh`: the group's global ranks equal
// mesh.layout().GroupOf(me, dim); an all-reduce (sum) of the world ranks
// equals their sum; an all-gather of the world ranks returns them in mesh
// order. Internal error naming the mesh, the dim and both values otherwise.
absl::Status CheckDimGroup(const DeviceMesh& mesh, int dim);

// CheckDimGroup for every dim.
absl::Status CheckAllDims(const DeviceMesh& mesh);

// Internal error `what` unless `ok`: a check inside a rank's body.
inline absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// Early returns for a rank's body, which returns absl::Status (test code
// only; Abseil 20220623 has no public status macros).
#define RETURN_IF_ERROR(expr)    \
  do {                           \
    absl::Status _s = (expr);    \
    if (!_s.ok()) return _s;     \
  } while (0)
#define ASSIGN_OR_RETURN(lhs, expr)                \
  auto lhs##_or = (expr);                          \
  if (!lhs##_or.ok()) return lhs##_or.status();    \
  auto lhs = *std::move(lhs##_or)

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_DEVICE_MESH_MESH_CHECKS_H_
