// devmesh/tests/comm/typed_values.h
// -----------------------------------------------------------------------------
// Test helper (testonly): buffers of any DataType built from doubles, and the
// exact expected results of reductions. Inputs are small integers (and, for
// floats, halves), so every dtype holds them and every sum, product, min,
// max and power-of-two average is exact.
#ifndef DEVMESH_TESTS_COMM_TYPED_VALUES_H_
#define DEVMESH_TESTS_COMM_TYPED_VALUES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace devmesh {
namespace testing {

// The bytes of `values` converted to `dtype`.
std::vector<char> Encode(DataType dtype, const std::vector<double>& values);
// `count` elements of `dtype` at `data`, as doubles.
std::vector<double> Decode(DataType dtype, const void* data, size_t count);

// Input element i of `rank` for a reduction `op`: prod gets 1, 2 or -1 (no
// -1 for uint8) so that 8-rank products stay in int8 range; the others get
// integers in [-4, 6] ([0, 10] for uint8), plus 0.5 for float dtypes.
double InputValue(ReduceOp op, DataType dtype, int rank, size_t i);

// op over `inputs` as the backends compute it (avg of integers truncates
// toward zero).
double ReduceValues(ReduceOp op, DataType dtype,
                    const std::vector<double>& inputs);

// OK when actual == expected element-wise; else InvalidArgument naming
// `what`, the first differing index and both values.
absl::Status CheckEqual(const std::string& what,
                        const std::vector<double>& expected,
                        const std::vector<double>& actual);

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_COMM_TYPED_VALUES_H_
