// From another workspace: layout math from @devmesh//mesh, and a 2x2
// DeviceMesh over shared memory (the CPU default inside a host) with four
// ranks as threads (InMemoryStore).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"
#include "status/status_macros.h"
#include "store/memory_store.h"

TEST(Consumer, MeshLayout) {
  auto layout = devmesh::MeshLayout::FromShape({2, 4}, {"dp", "tp"});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->LayoutString(), "[dp,tp](2,4):(4,1)+0");
  EXPECT_EQ(*layout->GroupOf(5, 0), (std::vector<int64_t>{1, 5}));
}

// One rank's program, written as a user's would be: each step returns an
// absl::Status, and the collective is typed (int64 deduced from the span).
absl::Status SumAlongTp(std::shared_ptr<devmesh::Store> store, int rank,
                        int64_t& sum) {
  DEVMESH_ASSIGN_OR_RETURN(auto runtime,
                           devmesh::MeshRuntime::Create(store, rank, 4, rank));
  DEVMESH_ASSIGN_OR_RETURN(
      devmesh::DeviceMesh mesh,
      devmesh::InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
  DEVMESH_ASSIGN_OR_RETURN(auto tp, mesh.GetGroup("tp"));
  const std::vector<int64_t> mine = {rank};
  return tp->AllReduce(mine, absl::MakeSpan(&sum, 1), devmesh::ReduceOp::kSum);
}

TEST(Consumer, DeviceMeshAllReduceAlongTp) {
  auto store = std::make_shared<devmesh::InMemoryStore>();
  std::vector<std::string> errors(4);
  std::vector<int64_t> sums(4, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      absl::Status s = SumAlongTp(store, r, sums[r]);
      if (!s.ok()) errors[r] = s.ToString();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(sums, (std::vector<int64_t>{1, 1, 5, 5}));
}
