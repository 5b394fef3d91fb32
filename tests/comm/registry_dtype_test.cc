// devmesh/tests/comm/registry_dtype_test.cc
// The backend registry, dtype/op names, and the Gloo reduction arithmetic.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "store/memory_store.h"
#include "comm/dtype.h"
#include "comm/reduce_functions.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/registry.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(DataTypeTest, SizesAndNamesRoundTrip) {
  const std::vector<size_t> sizes = {4, 8, 2, 2, 1, 1, 4, 8};
  const std::vector<std::string> names = {"float32", "float64", "float16",
                                          "bfloat16", "int8",   "uint8",
                                          "int32",   "int64"};
  for (size_t i = 0; i < kAllDataTypes.size(); ++i) {
    EXPECT_EQ(DataTypeSize(kAllDataTypes[i]), sizes[i]);
    EXPECT_EQ(DataTypeName(kAllDataTypes[i]), names[i]);
    auto parsed = ParseDataType(names[i]);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kAllDataTypes[i]);
  }
  auto bad = ParseDataType("float8");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "\"float8\""));
}

TEST(ReduceOpTest, NamesRoundTrip) {
  const std::vector<std::string> names = {"sum", "prod", "min", "max", "avg"};
  for (size_t i = 0; i < kAllReduceOps.size(); ++i) {
    EXPECT_EQ(ReduceOpName(kAllReduceOps[i]), names[i]);
    EXPECT_EQ(*ParseReduceOp(names[i]), kAllReduceOps[i]);
  }
  EXPECT_EQ(ParseReduceOp("mean").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReduceFunctionTest, IntegerSumAndProdWrap) {
  int8_t a[2] = {100, -128}, b[2] = {100, -1}, out[2];
  reduce_internal::GetReduceFunction(DataType::kInt8, ReduceOp::kSum)(out, a, b, 2);
  EXPECT_EQ(out[0], -56);   // 200 mod 256
  EXPECT_EQ(out[1], 127);   // -129 mod 256
  int32_t c = INT32_MAX, d = 2, p;
  reduce_internal::GetReduceFunction(DataType::kInt32, ReduceOp::kProd)(&p, &c, &d, 1);
  EXPECT_EQ(p, -2);
}

TEST(ReduceFunctionTest, AvgDivisionTruncatesTowardZeroForIntegers) {
  int32_t v[3] = {-7, 7, 8};
  reduce_internal::DivideInPlace(v, 3, DataType::kInt32, 2);
  EXPECT_EQ(v[0], -3);
  EXPECT_EQ(v[1], 3);
  EXPECT_EQ(v[2], 4);
  uint8_t u = 255;
  reduce_internal::DivideInPlace(&u, 1, DataType::kUInt8, 300);  // No narrowing.
  EXPECT_EQ(u, 0);
}

TEST(ReduceFunctionTest, BFloat16RoundsToNearestEven) {
  using reduce_internal::BFloat16ToFloat;
  using reduce_internal::FloatToBFloat16;
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even (0x3F82).
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3F82);
  uint16_t a = FloatToBFloat16(1.5f), b = FloatToBFloat16(2.25f), out;
  reduce_internal::GetReduceFunction(DataType::kBFloat16, ReduceOp::kMax)(&out, &a, &b, 1);
  EXPECT_EQ(BFloat16ToFloat(out), 2.25f);
  reduce_internal::GetReduceFunction(DataType::kBFloat16, ReduceOp::kProd)(&out, &a, &b, 1);
  EXPECT_EQ(BFloat16ToFloat(out), 3.375f);
}

TEST(ReduceFunctionTest, Float16MinAndSum) {
  using reduce_internal::Float16ToFloat;
  using reduce_internal::FloatToFloat16;
  uint16_t a = FloatToFloat16(-0.5f), b = FloatToFloat16(1024.0f), out;
  reduce_internal::GetReduceFunction(DataType::kFloat16, ReduceOp::kMin)(&out, &a, &b, 1);
  EXPECT_EQ(Float16ToFloat(out), -0.5f);
  reduce_internal::GetReduceFunction(DataType::kFloat16, ReduceOp::kSum)(&out, &a, &b, 1);
  EXPECT_EQ(Float16ToFloat(out), 1023.5f);
}

TEST(RegistryTest, UnknownBackendIsNotFoundListingKnownOnes) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  auto comm = CreateCommunicator("mpi", store, 0, 1);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "\"mpi\""));
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "gloo, nccl"))
      << comm.status();
}

TEST(RegistryTest, GlooByName) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  auto comm = CreateCommunicator("gloo", store, 0, 1);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "gloo");
}

TEST(RegistryTest, NcclWithoutNcclOrGpuIsUnavailable) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  if (NcclBuiltIn() && CudaDeviceCount().ok()) {
    GTEST_SKIP() << "a CUDA device is visible: covered by nccl_test";
  }
  auto comm = CreateCommunicator("nccl", store, 0, 1);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnavailable);
  const std::string expected = NcclBuiltIn() ? "no CUDA device visible"
                                             : "devmesh was built without NCCL";
  EXPECT_TRUE(absl::StrContains(comm.status().message(), expected))
      << comm.status();
}

TEST(RegistryTest, RegisterBackend) {
  auto factory = [](std::shared_ptr<Store>, int, int, const CommOptions&)
      -> absl::StatusOr<std::unique_ptr<Communicator>> {
    return absl::UnimplementedError("test backend");
  };
  ASSERT_TRUE(RegisterBackend("test_backend", factory).ok());
  EXPECT_EQ(RegisterBackend("test_backend", factory).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterBackend("", factory).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterBackend("null", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KnownBackends(),
            (std::vector<std::string>{"gloo", "nccl", "shm", "test_backend", "ucx"}));
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  EXPECT_EQ(CreateCommunicator("test_backend", store, 0, 1).status().message(),
            "test backend");
}

}  // namespace
}  // namespace devmesh
