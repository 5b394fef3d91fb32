// What DeviceMesh asks of its backend, seen through a recording backend
// registered under "recording" (one rank, no processes): a world-sized dim
// is the world communicator of its timeout, a dim with an NCCL config is a
// group of its own made with it in its CommOptions (stream and synchronize
// included) and makes no world at all; never a Split; NCCL configs survive
// Serialize / Deserialize; one group has one stream.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "store/memory_store.h"
#include "comm/registry.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/members_only_comm.h"

namespace devmesh {
namespace {

// Every Split's options, in call order (mesh groups make none).
std::vector<SplitOptions>& Splits() {
  static auto* splits = new std::vector<SplitOptions>();
  return *splits;
}

// The options of every communicator the backend created, in call order.
std::vector<CommOptions>& Created() {
  static auto* created = new std::vector<CommOptions>();
  return *created;
}

class RecordingComm : public testing::MembersOnlyComm {
 public:
  RecordingComm() : MembersOnlyComm("recording", 0, {0}) {}

 protected:
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int, const SplitOptions& options) override {
    Splits().push_back(options);
    if (color == kNoColor) return std::unique_ptr<Communicator>();
    return std::unique_ptr<Communicator>(new RecordingComm());
  }
};

class SplitOptionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(RegisterBackend("recording",
                                [](std::shared_ptr<Store>, int, int,
                                   const CommOptions& options) {
                                  Created().push_back(options);
                                  return absl::StatusOr<
                                      std::unique_ptr<Communicator>>(
                                      std::make_unique<RecordingComm>());
                                })
                    .ok());
  }
  void SetUp() override {
    Splits().clear();
    Created().clear();
  }

  std::shared_ptr<MeshRuntime> runtime_ = *MeshRuntime::Create(
      std::make_shared<InMemoryStore>(), 0, 1, 0);
};

TEST_F(SplitOptionsTest, WorldDimIsTheWorldOfItsTimeout) {
  MeshOptions options;
  options.all.backend = "recording";
  options.all.timeout = absl::Seconds(30);
  DeviceMesh m = *InitDeviceMesh(runtime_, "cpu", {1}, {"w"}, options);
  auto g = m.GetGroup("w");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, *runtime_->World("recording", absl::Seconds(30)));
  ASSERT_EQ(Created().size(), 1u);
  EXPECT_EQ(Created()[0].timeout, absl::Seconds(30));
  EXPECT_EQ(runtime_->world_communicators(), 1);
  EXPECT_EQ(runtime_->group_creations(), 0);
  // The same dim with its own timeout: the world communicator of that
  // timeout, made with it (one per (backend, timeout)).
  GroupOptions own;
  own.timeout = absl::Seconds(7);
  DeviceMesh f = *m.Flatten("w2", own);
  EXPECT_EQ(f.mesh(), RankTable({0}));
  auto g2 = f.GetGroup();
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_NE(*g2, *g);
  EXPECT_EQ(*g2, *runtime_->World("recording", absl::Seconds(7)));
  ASSERT_EQ(Created().size(), 2u);
  EXPECT_EQ(Created()[1].timeout, absl::Seconds(7));
  EXPECT_TRUE(Splits().empty());
  EXPECT_EQ(runtime_->world_communicators(), 2);
  EXPECT_EQ(runtime_->group_creations(), 0);
}

TEST_F(SplitOptionsTest, NcclConfigIsOneGroupAndSurvivesBytes) {
  MeshOptions options;
  options.all.backend = "recording";
  NcclOptions config;
  config.split_share = 1;
  config.min_ctas = 4;
  config.max_ctas = 16;
  config.net_name = "Socket";
  config.synchronize = false;
  int stream_tag = 0;
  config.stream = &stream_tag;
  options.per_dim["w"].nccl = config;
  DeviceMesh m = *InitDeviceMesh(runtime_, "cpu", {1}, {"w"}, options);
  auto g = m.GetGroup("w");
  ASSERT_TRUE(g.ok()) << g.status();
  // Its own config: a group of its own, and no world communicator at all.
  ASSERT_EQ(Created().size(), 1u);
  EXPECT_EQ(runtime_->world_communicators(), 0);
  const NcclOptions& got = Created()[0].nccl;
  EXPECT_EQ(got.split_share, 1);
  EXPECT_EQ(got.min_ctas, 4);
  EXPECT_EQ(got.max_ctas, 16);
  EXPECT_EQ(got.net_name, "Socket");
  EXPECT_EQ(got.stream, &stream_tag);
  EXPECT_FALSE(got.synchronize);
  EXPECT_EQ(Created()[0].timeout, absl::Seconds(300));
  EXPECT_TRUE(Splits().empty());
  // Cached: a second GetGroup creates nothing.
  EXPECT_EQ(*m.GetGroup("w"), *g);
  EXPECT_EQ(Created().size(), 1u);
  // Bytes keep the config.
  auto back = DeviceMesh::Deserialize(m.Serialize(), runtime_);
  ASSERT_TRUE(back.ok()) << back.status();
  const GroupOptions w = back->options().per_dim.at("w");
  ASSERT_TRUE(w.nccl.has_value());
  EXPECT_EQ(w.nccl->split_share, 1);
  EXPECT_EQ(w.nccl->min_ctas, 4);
  EXPECT_EQ(w.nccl->max_ctas, 16);
  EXPECT_EQ(w.nccl->cga_cluster_size, -1);
  EXPECT_EQ(w.nccl->net_name, "Socket");
  EXPECT_EQ(back->options().all.backend, "recording");
  // Truncated bytes are an error, never a crash.
  const std::string bytes = m.Serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(DeviceMesh::Deserialize(bytes.substr(0, n), runtime_)
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument)
        << n;
  }
}

TEST_F(SplitOptionsTest, SameGroupWithAnotherStreamIsInvalidArgument) {
  MeshOptions options;
  options.all.backend = "recording";
  int a = 0, b = 0;
  NcclOptions config;
  config.stream = &a;
  options.per_dim["w"].nccl = config;
  DeviceMesh m = *InitDeviceMesh(runtime_, "cpu", {1}, {"w"}, options);
  ASSERT_TRUE(m.GetGroup("w").ok());
  // A flatten of the same ranks with the same config but another stream:
  // the same group on every member, so not a second one here.
  GroupOptions other;
  other.backend = "recording";
  other.nccl = config;
  other.nccl->stream = &b;
  DeviceMesh f = *m.Flatten("w2", other);
  auto g = f.GetGroup();
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_NE(g.status().message().find("one group has one stream"),
            std::string::npos)
      << g.status();
  EXPECT_EQ(Created().size(), 1u);
}

}  // namespace
}  // namespace devmesh
