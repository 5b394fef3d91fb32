// devmesh/tests/device_mesh/layout_query_alloc_test.cc
// The layout queries answer from what the mesh made: after the first call,
// GetCoordinate, GetLocalRank, size, GetRank and GetGroup of a made group
// allocate nothing (operator new is counted in this binary), and give the
// same answers as the first call.
#include <cstdlib>
#include <memory>
#include <new>

#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace {
// This thread's allocations only: the failure watch's thread allocates too,
// whenever its lease comes round.
thread_local int64_t allocations = 0;
}  // namespace

void* operator new(size_t n) {
  ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace devmesh {
namespace {

TEST(LayoutQueryAllocTest, RepeatedQueriesAllocateNothing) {
  auto runtime =
      MeshRuntime::Create(std::make_shared<InMemoryStore>(), 0, 1, 0);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  auto mesh = InitDeviceMesh(*runtime, "cpu", {1, 1}, {"dp", "tp"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto first_group = mesh->GetGroup("tp");
  ASSERT_TRUE(first_group.ok()) << first_group.status();
  const auto& first_coordinate = mesh->GetCoordinate();
  ASSERT_TRUE(first_coordinate.has_value());

  const int64_t before = allocations;
  int64_t sum = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto& c = mesh->GetCoordinate();
    sum += c.has_value() ? (*c)[0] + (*c)[1] + 1 : 100;
    sum += *mesh->GetLocalRank("tp") + *mesh->GetLocalRank(0);
    sum += *mesh->size("dp") + *mesh->size(1) - 2;
    sum += mesh->GetRank();
    auto group = mesh->GetGroup("tp");
    sum += (group.ok() && *group == *first_group) ? 0 : 1000;
  }
  const int64_t spent = allocations - before;
  EXPECT_EQ(spent, 0) << "allocations in 1000 rounds of queries";
  EXPECT_EQ(sum, 1000);
  EXPECT_EQ(&mesh->GetCoordinate(), &first_coordinate);
}

// A rank outside the mesh: nullopt and FailedPrecondition, as before.
TEST(LayoutQueryAllocTest, ANonMemberGetsNoCoordinate) {
  auto runtime =
      MeshRuntime::Create(std::make_shared<InMemoryStore>(), 3, 4, 0);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  auto mesh =
      DeviceMesh::Create(*runtime, "cpu", RankTable::List({0, 1}), {"w"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_FALSE(mesh->GetCoordinate().has_value());
  EXPECT_EQ(mesh->GetLocalRank("w").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*mesh->size("w"), 2);
}

}  // namespace
}  // namespace devmesh
