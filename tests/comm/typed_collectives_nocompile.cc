// devmesh/tests/comm/typed_collectives_nocompile.cc
// Calls of the typed collectives that must not compile, one per
// DEVMESH_NOCOMPILE_CASE value; typed_collectives_nocompile_test.sh compiles
// each and checks that the compiler prints the static_assert message it
// expects. Case 0 must compile (it proves the harness finds the headers).
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "comm/communicator.h"

namespace devmesh {

absl::Status Case(Communicator& comm) {
#if DEVMESH_NOCOMPILE_CASE == 0
  std::vector<float> v(4);
  return comm.AllReduce(absl::MakeSpan(v), ReduceOp::kSum);
#elif DEVMESH_NOCOMPILE_CASE == 1
  // uint16_t: float16 or bfloat16? Use devmesh::Float16 / BFloat16.
  std::vector<uint16_t> v(4);
  return comm.AllReduce(absl::MakeSpan(v), ReduceOp::kSum);
#elif DEVMESH_NOCOMPILE_CASE == 2
  // char: signedness is the platform's; use int8_t or uint8_t.
  std::vector<char> v(4), w(16);
  return comm.AllGather(v, absl::MakeSpan(w));
#elif DEVMESH_NOCOMPILE_CASE == 3
  struct Pair { float a, b; };
  std::vector<Pair> v(4);
  return comm.Send(absl::MakeSpan(v), 1);
#elif DEVMESH_NOCOMPILE_CASE == 4
  // A read-only receive span.
  const std::vector<float> v(4);
  return comm.Recv(absl::MakeSpan(v), 1);
#else
#error "unknown DEVMESH_NOCOMPILE_CASE"
#endif
}

}  // namespace devmesh
