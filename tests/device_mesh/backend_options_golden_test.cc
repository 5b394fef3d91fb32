// devmesh/tests/device_mesh/backend_options_golden_test.cc
// What a group's backend options become outside the backend, as exact
// values recorded before they went through the registry's option codecs
// (comm/backend_options.h): the group identity a dim's NCCL config makes
// (seen as the store keys of its group: FNV-1a 64 of the identity text and
// members, device_mesh/group_tag.h), the serialized mesh bytes, and the
// process-local fields a second use of the same group is compared on.
// The identity and the bytes must not change when the option handling moves
// (other processes and stored meshes read them); the message names the
// backend whose local fields differ.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/registry.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"
#include "tests/device_mesh/members_only_comm.h"

namespace devmesh {
namespace {

// device_mesh/group_tag.h's GroupTag, copied: the test checks the identity
// text through the key it names.
std::string Tag(absl::string_view identity, const std::vector<int>& members) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](absl::string_view bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(identity);
  mix("|");
  mix(absl::StrJoin(members, ","));
  return absl::StrCat(absl::Hex(hash, absl::kZeroPad16));
}

class ProbeComm : public testing::MembersOnlyComm {
 public:
  ProbeComm() : MembersOnlyComm("probe", 0, {0}) {}
};

class BackendOptionsGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Each group it makes writes "probe" in its own store namespace.
    ASSERT_TRUE(RegisterBackend(
                    "probe",
                    [](std::shared_ptr<Store> store, int, int,
                       const CommOptions&)
                        -> absl::StatusOr<std::unique_ptr<Communicator>> {
                      absl::Status s = store->Set("probe", "1");
                      if (!s.ok()) return s;
                      return std::unique_ptr<Communicator>(new ProbeComm());
                    })
                    .ok());
  }

  bool HasKey(const std::string& key) {
    auto has = store_->Check({key});
    return has.ok() && *has;
  }

  std::shared_ptr<InMemoryStore> store_ = std::make_shared<InMemoryStore>();
  std::shared_ptr<MeshRuntime> runtime_ =
      *MeshRuntime::Create(store_, 0, 1, 0);
};

NcclOptions Config() {
  NcclOptions config;
  config.split_share = 1;
  config.cga_cluster_size = 2;
  config.min_ctas = 4;
  config.max_ctas = 16;
  config.net_name = "Socket";
  return config;
}

TEST_F(BackendOptionsGoldenTest, NcclConfigGroupIdentity) {
  MeshOptions options;
  options.all.backend = "probe";
  options.per_dim["w"].nccl = Config();
  DeviceMesh m = *InitDeviceMesh(runtime_, "cpu", {1}, {"w"}, options);
  ASSERT_TRUE(m.GetGroup("w").ok());
  const std::string identity =
      "root0|(1:0)|probe|300000000000|nccl:1,1,2,4,16,Socket";
  EXPECT_TRUE(HasKey(
      absl::StrCat("devmesh/group/", Tag(identity, {0}), "/0/probe")))
      << identity;
  // The same options on a flatten of the same ranks: the same identity,
  // so the same group, made once.
  DeviceMesh f = *m.Flatten("w2", options.per_dim["w"]);
  ASSERT_TRUE(f.GetGroup().ok());
  EXPECT_EQ(runtime_->group_creations(), 1);
}

TEST_F(BackendOptionsGoldenTest, SerializedBytes) {
  MeshOptions options;
  options.all.backend = "probe";
  options.all.timeout = absl::Seconds(30);
  options.per_dim["w"].nccl = Config();
  options.per_dim["w"].nccl->stream = &options;  // local: not serialized
  options.per_dim["w"].nccl->cuda_device = 3;    // local: not serialized
  DeviceMesh m = *InitDeviceMesh(runtime_, "cpu", {1}, {"w"}, options);
  EXPECT_EQ(absl::BytesToHexString(m.Serialize()),
            "444d4553480203000000000000006370751300000000000000444d4c5901"
            "0001010101770001000100010177050000000000000070726f62650100ac"
            "23fc060000000001000000000000000100000000000000770000000000000000"
            "0000000000000000000101000000000000000100000000000000020000000000"
            "0000040000000000000010000000000000000600000000000000536f636b6574");
  auto back = DeviceMesh::Deserialize(m.Serialize(), runtime_);
  ASSERT_TRUE(back.ok()) << back.status();
  const GroupOptions w = back->options().per_dim.at("w");
  ASSERT_TRUE(w.nccl.has_value());
  EXPECT_EQ(w.nccl->blocking, 1);
  EXPECT_EQ(w.nccl->split_share, 1);
  EXPECT_EQ(w.nccl->cga_cluster_size, 2);
  EXPECT_EQ(w.nccl->min_ctas, 4);
  EXPECT_EQ(w.nccl->max_ctas, 16);
  EXPECT_EQ(w.nccl->net_name, "Socket");
  EXPECT_EQ(w.nccl->stream, nullptr);
  EXPECT_EQ(w.nccl->cuda_device, -1);
  EXPECT_TRUE(w.nccl->synchronize);
  EXPECT_FALSE(back->options().all.nccl.has_value());
}

TEST_F(BackendOptionsGoldenTest, LocalFieldsOfOneGroup) {
  MeshOptions options;
  options.all.backend = "probe";
  NcclOptions config;
  config.cuda_device = 1;
  options.per_dim["w"].nccl = config;
  DeviceMesh m = *InitDeviceMesh(runtime_, "cpu", {1}, {"w"}, options);
  ASSERT_TRUE(m.GetGroup("w").ok());
  GroupOptions other;
  other.backend = "probe";
  other.nccl = config;
  other.nccl->cuda_device = 2;
  other.nccl->synchronize = false;
  DeviceMesh f = *m.Flatten("w2", other);
  auto g = f.GetGroup();
  EXPECT_EQ(g.status(),
            absl::InvalidArgumentError(
                "mesh dim w2 asks for the group of ranks along (1:0) with nccl "
                "options stream=0, synchronize=0, cuda_device=2, but this root "
                "already made that group with nccl options stream=0, "
                "synchronize=1, cuda_device=1: one group has one stream; give "
                "the dim other options (a timeout, say) for a group of its "
                "own"));
}

}  // namespace
}  // namespace devmesh
