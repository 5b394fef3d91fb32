// From another workspace: layout math from @devmesh//mesh, and a 2x2
// DeviceMesh over Gloo with four ranks as threads (InMemoryStore).
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"

TEST(Consumer, MeshLayout) {
  auto layout = devmesh::MeshLayout::FromShape({2, 4}, {"dp", "tp"});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->LayoutString(), "[dp,tp](2,4):(4,1)+0");
  EXPECT_EQ(*layout->GroupOf(5, 0), (std::vector<int64_t>{1, 5}));
}

TEST(Consumer, DeviceMeshAllReduceAlongTp) {
  auto store = std::make_shared<devmesh::InMemoryStore>();
  std::vector<std::string> errors(4);
  std::vector<int64_t> sums(4, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      auto runtime = devmesh::MeshRuntime::Create(store, r, 4, r);
      auto mesh = devmesh::InitDeviceMesh(*runtime, "cpu", {2, 2}, {"dp", "tp"});
      if (!mesh.ok()) { errors[r] = mesh.status().ToString(); return; }
      auto tp = mesh->GetGroup("tp");
      if (!tp.ok()) { errors[r] = tp.status().ToString(); return; }
      int64_t v = r;
      absl::Status s = (*tp)->AllReduce(&v, &sums[r], 1,
                                        devmesh::DataType::kInt64,
                                        devmesh::ReduceOp::kSum);
      if (!s.ok()) errors[r] = s.ToString();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(sums, (std::vector<int64_t>{1, 1, 5, 5}));
}
