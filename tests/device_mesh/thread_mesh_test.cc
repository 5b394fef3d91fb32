// DeviceMesh over Gloo with ranks as threads sharing one InMemoryStore: quick
// checks of group creation and reuse inside one process, and of distinct
// groups created at once from distinct threads of one rank.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "store/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

constexpr int kWorld = 4;

// Ranks 0..kWorld-1 as threads over one InMemoryStore, each with a
// (dp=2, tp=2) "cpu" mesh; `body` returns "" or what went wrong. Each
// rank's error, "" when none.
std::vector<std::string> RunRanks(
    const std::function<std::string(int, const std::shared_ptr<MeshRuntime>&,
                                     DeviceMesh&)>& body) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto runtime = MeshRuntime::Create(store, r, kWorld, r);
      if (!runtime.ok()) { errors[r] = runtime.status().ToString(); return; }
      auto mesh = InitDeviceMesh(*runtime, "cpu", {2, 2}, {"dp", "tp"});
      if (!mesh.ok()) { errors[r] = mesh.status().ToString(); return; }
      errors[r] = body(r, *runtime, *mesh);
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// The sum over `dim`'s group of each member's rank (rank `r` here).
absl::StatusOr<float> SumOfRanks(const DeviceMesh& mesh, const char* dim,
                                 int r) {
  auto g = mesh.GetGroup(dim);
  if (!g.ok()) return g.status();
  float v = static_cast<float>(r);
  absl::Status s =
      (*g)->AllReduce(&v, &v, 1, DataType::kFloat32, ReduceOp::kSum);
  if (!s.ok()) return s;
  return v;
}

TEST(ThreadMesh, AllReduceAlongEachDim) {
  std::vector<std::vector<float>> results(kWorld);
  std::vector<std::string> errors = RunRanks(
      [&](int r, const std::shared_ptr<MeshRuntime>& runtime,
          DeviceMesh& mesh) -> std::string {
        for (const char* dim : {"dp", "tp"}) {
          auto v = SumOfRanks(mesh, dim, r);
          if (!v.ok()) return v.status().ToString();
          results[r].push_back(*v);
        }
        auto tp = mesh.Slice({"tp"});
        auto g1 = tp->GetGroup();
        auto g2 = mesh.GetGroup("tp");
        if (g1.ok() && g2.ok() && *g1 != *g2) {
          return "slice did not reuse the tp group";
        }
        if (runtime->group_creations() != 2 ||
            runtime->world_communicators() != 0) {
          return "expected 2 groups and no world communicator";
        }
        return "";
      });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // dp groups {0,2},{1,3}; tp groups {0,1},{2,3}.
  EXPECT_EQ(results[0], (std::vector<float>{2, 1}));
  EXPECT_EQ(results[1], (std::vector<float>{4, 1}));
  EXPECT_EQ(results[2], (std::vector<float>{2, 5}));
  EXPECT_EQ(results[3], (std::vector<float>{4, 5}));
}

// Rank 0 asks for its dp group (with rank 2, which comes 1 s late) on one
// thread and, 100 ms later, for its tp group (with rank 1) on another, and
// for dp again on a third: tp is made while dp still waits (rank 1's tp
// group within 0.5 s, not after rank 2), and dp once (2 creations on rank
// 0). With creation serialized per root, tp waited for dp: about 1 s.
TEST(ThreadMesh, DistinctGroupsAreMadeAtOnce) {
  std::vector<absl::Duration> tp_took(kWorld);
  std::vector<int64_t> creations(kWorld, -1);
  std::vector<std::string> errors = RunRanks(
      [&](int r, const std::shared_ptr<MeshRuntime>& runtime,
          DeviceMesh& mesh) -> std::string {
        auto sum = [&](const char* dim, float expect) -> std::string {
          auto v = SumOfRanks(mesh, dim, r);
          if (!v.ok()) return v.status().ToString();
          return *v == expect
                     ? std::string()
                     : absl::StrCat(dim, " sum ", *v, ", want ", expect);
        };
        // dp groups {0,2},{1,3}; tp groups {0,1},{2,3}.
        const float dp = r % 2 == 0 ? 2 : 4;
        const float tp = r < 2 ? 1 : 5;
        if (r == 2) absl::SleepFor(absl::Seconds(1));
        std::string e1, e2;
        const absl::Time start = absl::Now();
        if (r == 0) {
          std::thread dp_thread([&] { e1 = sum("dp", dp); });
          absl::SleepFor(absl::Milliseconds(100));
          std::thread again([&] { (void)mesh.GetGroup("dp"); });
          e2 = sum("tp", tp);
          dp_thread.join();
          again.join();
        } else {
          e2 = sum("tp", tp);
          tp_took[r] = absl::Now() - start;
          e1 = sum("dp", dp);
        }
        creations[r] = runtime->group_creations();
        return e1 + e2;
      });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(creations[r], 2) << "rank " << r;
  }
  EXPECT_LT(tp_took[1], absl::Milliseconds(500));
}

}  // namespace
}  // namespace devmesh
