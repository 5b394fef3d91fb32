// DeviceMesh::Shrink in one process: its argument errors, and a Shrink with
// no dead rank (a one-rank world over an in-memory store), which moves the
// job to epoch 1 with the same mesh: the old mesh's groups then refuse, an
// idle whole group is kept, and the old mesh cannot be shrunk again.
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
  auto detached = InitDeviceMesh(MeshRuntime::Detached(0), "cpu", {1});
  if (detached.ok()) {
    EXPECT_EQ(detached->Shrink(0).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(ShrinkErrors, NoDeadRankMovesToTheNextEpochWithTheSameMesh) {
  DeviceMesh mesh = OneRankMesh();
  auto tp = mesh.GetGroup("tp");
  ASSERT_TRUE(tp.ok()) << tp.status();
  float x = 2;
  ASSERT_TRUE((*tp)->AllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum)
                  .ok());
  auto shrunk = mesh.Shrink("dp");
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_EQ(shrunk->report.epoch, 1);
  EXPECT_EQ(shrunk->mesh.epoch(), 1);
  EXPECT_TRUE(shrunk->report.dead.empty());
  EXPECT_TRUE(shrunk->report.removed_replicas.empty());
  EXPECT_EQ(shrunk->mesh, mesh);  // same ranks, names and device type
  // tp was made, idle and whole: kept. On one rank both dims are the same
  // one-rank line (the world), one group in the cache: dp is kept with it.
  EXPECT_EQ(shrunk->report.kept,
            (std::vector<std::string>{"dp [0]", "tp [0]"}));
  EXPECT_TRUE(shrunk->report.rebuilt.empty());
  // The old mesh's group refuses; the new mesh's works.
  absl::Status old = (*tp)->AllReduce(&x, &x, 1, DataType::kFloat32,
                                      ReduceOp::kSum);
  EXPECT_EQ(old.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(old.message(), "moved on to epoch 1")) << old;
  auto new_tp = shrunk->mesh.GetGroup("tp");
  ASSERT_TRUE(new_tp.ok()) << new_tp.status();
  x = 3;
  EXPECT_TRUE((*new_tp)->AllReduce(&x, &x, 1, DataType::kFloat32,
                                   ReduceOp::kSum).ok());
  EXPECT_EQ(x, 3);
  auto again = mesh.Shrink("dp");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(again.status().message(),
                                "this mesh is of epoch 0 but the job is at "
                                "epoch 1"))
      << again.status();
}

}  // namespace
}  // namespace devmesh
