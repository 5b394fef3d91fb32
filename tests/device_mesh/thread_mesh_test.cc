// DeviceMesh over Gloo with ranks as threads sharing one InMemoryStore: quick
// checks of group creation and reuse inside one process.
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

TEST(ThreadMesh, AllReduceAlongEachDim) {
  auto store = std::make_shared<InMemoryStore>();
  constexpr int kWorld = 4;
  std::vector<std::string> errors(kWorld);
  std::vector<std::vector<float>> results(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto runtime = MeshRuntime::Create(store, r, kWorld, r);
      if (!runtime.ok()) { errors[r] = runtime.status().ToString(); return; }
      auto mesh = InitDeviceMesh(*runtime, "cpu", {2, 2}, {"dp", "tp"});
      if (!mesh.ok()) { errors[r] = mesh.status().ToString(); return; }
      for (const char* dim : {"dp", "tp"}) {
        auto g = mesh->GetGroup(dim);
        if (!g.ok()) { errors[r] = g.status().ToString(); return; }
        float v = static_cast<float>(r);
        absl::Status s = (*g)->AllReduce(&v, &v, 1, DataType::kFloat32, ReduceOp::kSum);
        if (!s.ok()) { errors[r] = s.ToString(); return; }
        results[r].push_back(v);
      }
      auto tp = mesh->Slice({"tp"});
      auto g1 = tp->GetGroup();
      auto g2 = mesh->GetGroup("tp");
      if (g1.ok() && g2.ok() && *g1 != *g2) errors[r] = "slice did not reuse the tp group";
      if ((*runtime)->group_creations() != 2 ||
          (*runtime)->world_communicators() != 0) {
        errors[r] = "expected 2 groups and no world communicator";
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // dp groups {0,2},{1,3}; tp groups {0,1},{2,3}.
  EXPECT_EQ(results[0], (std::vector<float>{2, 1}));
  EXPECT_EQ(results[1], (std::vector<float>{4, 1}));
  EXPECT_EQ(results[2], (std::vector<float>{2, 5}));
  EXPECT_EQ(results[3], (std::vector<float>{4, 5}));
}

}  // namespace
}  // namespace devmesh
