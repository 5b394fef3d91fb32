// devmesh/status/status_macros.h
// -----------------------------------------------------------------------------
// Two macros for code whose functions return absl::Status or
// absl::StatusOr<T>, as devmesh's do (Abseil has equivalents only
// internally). Target: @devmesh//status (also reached through
// @devmesh//device_mesh).
//
//   absl::Status Train() {
//     DEVMESH_ASSIGN_OR_RETURN(devmesh::DeviceMesh mesh,
//                              devmesh::InitDeviceMesh("cpu", {2, 2}));
//     DEVMESH_ASSIGN_OR_RETURN(auto tp, mesh.GetGroup(1));
//     DEVMESH_RETURN_IF_ERROR(tp->Barrier());
//     return absl::OkStatus();
//   }
//
// DEVMESH_RETURN_IF_ERROR(expr): evaluates expr (an absl::Status) once; when
// it is not OK, returns it from the enclosing function unchanged (code,
// message and payloads). The enclosing function returns absl::Status or any
// absl::StatusOr<T>.
//
// DEVMESH_ASSIGN_OR_RETURN(lhs, expr): evaluates expr (an absl::StatusOr<T>)
// once; when it is not OK, returns its status as above; else moves the value
// into lhs, which is either a declaration (`auto x`, `const auto& x`,
// `std::unique_ptr<Foo> p`) or an existing variable (`x`, `*ptr`, `v[i]`):
// it expands to `lhs = std::move(value);` after a hidden temporary whose name
// is unique per use (__COUNTER__), so several may share a line or a scope.
// Move-only values (std::unique_ptr) work. It is several statements: use it
// inside braces, never as the body of an unbraced if or loop. lhs may not
// contain a comma outside parentheses (write `auto p`, or a type alias,
// instead of `std::pair<int, int> p`).
//
// Thread-safety: plain code; nothing is shared.
#ifndef DEVMESH_STATUS_STATUS_MACROS_H_
#define DEVMESH_STATUS_STATUS_MACROS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DEVMESH_RETURN_IF_ERROR(expr)                          \
  do {                                                         \
    ::absl::Status devmesh_return_if_error_status_ = (expr);   \
    if (!devmesh_return_if_error_status_.ok()) {               \
      return devmesh_return_if_error_status_;                  \
    }                                                          \
  } while (false)

#define DEVMESH_ASSIGN_OR_RETURN(lhs, expr)                              \
  DEVMESH_STATUS_INTERNAL_ASSIGN_OR_RETURN(                              \
      DEVMESH_STATUS_INTERNAL_CONCAT(devmesh_statusor_, __COUNTER__), lhs, \
      expr)

// Implementation details.
#define DEVMESH_STATUS_INTERNAL_CONCAT_INNER(a, b) a##b
#define DEVMESH_STATUS_INTERNAL_CONCAT(a, b) \
  DEVMESH_STATUS_INTERNAL_CONCAT_INNER(a, b)
#define DEVMESH_STATUS_INTERNAL_ASSIGN_OR_RETURN(statusor, lhs, expr) \
  auto statusor = (expr);                                             \
  if (!statusor.ok()) return std::move(statusor).status();            \
  lhs = *std::move(statusor)

#endif  // DEVMESH_STATUS_STATUS_MACROS_H_
