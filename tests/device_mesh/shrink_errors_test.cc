// DeviceMesh::Shrink in one process (a one-rank world over an in-memory
// store): its argument errors, and a Shrink with no dead rank, which is
// nothing to shrink and changes nothing. What it does after a death is
// //tests/device_mesh:shrink_test, with real processes.
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

DeviceMesh OneRankMesh() {
  auto runtime = MeshRuntime::Create(std::make_shared<InMemoryStore>(), 0, 1, 0);
  MeshOptions options;
  options.all.backend = "gloo";
  auto mesh = InitDeviceMesh(*runtime, "cpu", {1, 1}, {"dp", "tp"}, options);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

TEST(ShrinkErrors, ArgumentsAndMeshesShrinkRefuses) {
  DeviceMesh mesh = OneRankMesh();
  auto slice = mesh.Slice({"tp"});
  ASSERT_TRUE(slice.ok()) << slice.status();
  auto sub = slice->Shrink("dp");
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(sub.status().message(), "root mesh"))
      << sub.status();
  EXPECT_EQ(mesh.Shrink("pp").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(mesh.Shrink(5).status().code(), absl::StatusCode::kOutOfRange);
  ShrinkOptions bad;
  bad.min_replicas = 0;
  EXPECT_EQ(mesh.Shrink("dp", bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = ShrinkOptions();
  bad.max_rounds = 0;
  EXPECT_EQ(mesh.Shrink("dp", bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = ShrinkOptions();
  bad.lease = absl::Milliseconds(1);
  auto short_lease = mesh.Shrink("dp", bad);
  EXPECT_EQ(short_lease.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(short_lease.status().message(),
                                "at least two lease periods"))
      << short_lease.status();
  auto group = mesh.GetGroup("dp");
  ASSERT_TRUE(group.ok()) << group.status();
  auto detached = DeviceMesh::FromGroups(nullptr, "cpu", {*group});
  ASSERT_TRUE(detached.ok()) << detached.status();
  auto no_store = detached->Shrink(0);
  EXPECT_EQ(no_store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(no_store.status().message(), "store"))
      << no_store.status();
}

TEST(ShrinkErrors, NoDeadRankIsNothingToShrink) {
  DeviceMesh mesh = OneRankMesh();
  auto tp = mesh.GetGroup("tp");
  ASSERT_TRUE(tp.ok()) << tp.status();
  auto shrunk = mesh.Shrink("dp");
  EXPECT_EQ(shrunk.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(shrunk.status().message(),
                                "Shrink of epoch 0: no rank has been found "
                                "dead (no verdict in the store): nothing to "
                                "shrink"))
      << shrunk.status();
  // Nothing changed: the job is still at epoch 0 and the group works.
  EXPECT_EQ(mesh.epoch(), 0);
  float x = 2;
  EXPECT_TRUE((*tp)->AllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum)
                  .ok());
  EXPECT_EQ(x, 2);
}

}  // namespace
}  // namespace devmesh
