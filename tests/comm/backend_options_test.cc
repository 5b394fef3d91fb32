// devmesh/tests/comm/backend_options_test.cc
// Backend options through the registry (comm/backend_options.h): backend
// "nccl"'s codec by name (exact fields and texts, the member's own fields
// kept by a set, its GPU default), backends without options, an unknown
// name, a plug-in's codec registered with its factory; and
// CreateGroupCommunicator (comm/auto_group.h) on one rank.
#include "comm/backend_options.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/auto_group.h"
#include "comm/option_fields.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

CommOptions WithNccl() {
  CommOptions options;
  options.nccl.split_share = 1;
  options.nccl.min_ctas = 4;
  options.nccl.net_name = "IB";
  options.nccl.cuda_device = 5;
  options.nccl.synchronize = false;
  return options;
}

TEST(BackendOptionsTest, NcclAgreedFieldsByName) {
  EXPECT_EQ(OptionFieldsString(AgreedOptionFields("nccl", WithNccl())),
            "blocking=1, split_share=1, cga_cluster_size=-1, min_ctas=4, "
            "max_ctas=-1, net_name='IB'");
  EXPECT_EQ(OptionFieldValues(AgreedOptionFields("nccl", CommOptions())),
            "1,0,-1,-1,-1,");
}

TEST(BackendOptionsTest, NcclSetKeepsTheMembersOwnFields) {
  CommOptions options;
  int stream = 0;
  options.nccl.stream = &stream;
  options.nccl.cuda_device = 2;
  options.nccl.synchronize = false;
  ASSERT_TRUE(SetAgreedOptionFields(
                  "nccl", AgreedOptionFields("nccl", WithNccl()), &options)
                  .ok());
  EXPECT_EQ(options.nccl.blocking, 1);
  EXPECT_EQ(options.nccl.split_share, 1);
  EXPECT_EQ(options.nccl.cga_cluster_size, -1);
  EXPECT_EQ(options.nccl.min_ctas, 4);
  EXPECT_EQ(options.nccl.max_ctas, -1);
  EXPECT_EQ(options.nccl.net_name, "IB");
  EXPECT_EQ(options.nccl.stream, &stream);
  EXPECT_EQ(options.nccl.cuda_device, 2);
  EXPECT_FALSE(options.nccl.synchronize);
}

TEST(BackendOptionsTest, NcclSetRefusesOtherFields) {
  CommOptions options;
  std::vector<OptionField> fields = AgreedOptionFields("nccl", options);
  fields.pop_back();
  EXPECT_EQ(SetAgreedOptionFields("nccl", fields, &options),
            absl::InvalidArgumentError("NCCL options: 5 fields, expected 6"));
  EXPECT_EQ(options.nccl.split_share, 0);  // untouched
}

TEST(BackendOptionsTest, NcclLocalFieldsAndDefaults) {
  EXPECT_EQ(LocalOptionFields("nccl", WithNccl()),
            "stream=0, synchronize=0, cuda_device=5");
  // A device already chosen is kept; no GPU is asked for.
  CommOptions options = WithNccl();
  LocalPlace place;
  place.local_rank = 3;
  EXPECT_TRUE(FillLocalOptionDefaults("nccl", place, &options).ok());
  EXPECT_EQ(options.nccl.cuda_device, 5);
  // Unset, on a machine with no GPU (every build and test machine here):
  // Unavailable from the device count, the device still unset.
  options.nccl.cuda_device = -1;
  EXPECT_EQ(FillLocalOptionDefaults("nccl", place, &options).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(options.nccl.cuda_device, -1);
  EXPECT_EQ(PrepareThreadFor("nccl", place).code(),
            absl::StatusCode::kUnavailable);
}

TEST(BackendOptionsTest, BackendsWithoutOptions) {
  for (const char* backend : {"shm", "ucx"}) {
    EXPECT_TRUE(AgreedOptionFields(backend, WithNccl()).empty()) << backend;
    EXPECT_EQ(LocalOptionFields(backend, WithNccl()), "") << backend;
    CommOptions options = WithNccl();
    EXPECT_TRUE(SetAgreedOptionFields(backend, {}, &options).ok());
    EXPECT_TRUE(FillLocalOptionDefaults(backend, LocalPlace(), &options).ok());
    EXPECT_EQ(options.nccl.cuda_device, 5);
    EXPECT_TRUE(PrepareThreadFor(backend, LocalPlace()).ok());
  }
  CommOptions options;
  EXPECT_EQ(SetAgreedOptionFields("shm", AgreedOptionFields("nccl", options),
                                  &options),
            absl::InvalidArgumentError(
                "backend \"shm\" has no agreed option fields, got 6"));
}

TEST(BackendOptionsTest, UnknownBackend) {
  CommOptions options;
  EXPECT_TRUE(AgreedOptionFields("nope", options).empty());
  EXPECT_EQ(LocalOptionFields("nope", options), "");
  const absl::Status set = SetAgreedOptionFields("nope", {}, &options);
  EXPECT_EQ(set.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(set, CheckBackendLinked("nope"));
  EXPECT_TRUE(FillLocalOptionDefaults("nope", LocalPlace(), &options).ok());
  EXPECT_TRUE(PrepareThreadFor("nope", LocalPlace()).ok());
}

TEST(BackendOptionsTest, PluginRegistersItsCodec) {
  BackendOptionsCodec codec;
  codec.agreed_fields = [](const CommOptions& options) {
    OptionField f;
    f.name = "label";
    f.is_text = true;
    f.text = options.label;
    return std::vector<OptionField>{f};
  };
  codec.set_agreed_fields = [](absl::Span<const OptionField> fields,
                               CommOptions* options) {
    options->label = fields[0].text;
    return absl::OkStatus();
  };
  codec.local_fields = [](const CommOptions& options) {
    return std::string("timeout=") + absl::FormatDuration(options.timeout);
  };
  codec.fill_local_defaults = [](const LocalPlace& place,
                                 CommOptions* options) {
    options->global_ranks = {place.local_rank};
    return absl::OkStatus();
  };
  codec.prepare_thread = [](const LocalPlace& place) {
    return place.local_rank == 7 ? absl::OkStatus()
                                 : absl::FailedPreconditionError("not 7");
  };
  ASSERT_TRUE(RegisterBackend(
                  "coded",
                  [](std::shared_ptr<Store>, int, int, const CommOptions&)
                      -> absl::StatusOr<std::unique_ptr<Communicator>> {
                    return absl::UnimplementedError("no groups");
                  },
                  codec)
                  .ok());
  CommOptions options;
  options.label = "x";
  options.timeout = absl::Seconds(9);
  EXPECT_EQ(OptionFieldsString(AgreedOptionFields("coded", options)),
            "label='x'");
  EXPECT_EQ(LocalOptionFields("coded", options), "timeout=9s");
  CommOptions back;
  ASSERT_TRUE(SetAgreedOptionFields(
                  "coded", AgreedOptionFields("coded", options), &back)
                  .ok());
  EXPECT_EQ(back.label, "x");
  LocalPlace place;
  place.local_rank = 7;
  ASSERT_TRUE(FillLocalOptionDefaults("coded", place, &back).ok());
  EXPECT_EQ(back.global_ranks, std::vector<int>{7});
  EXPECT_TRUE(PrepareThreadFor("coded", place).ok());
  EXPECT_EQ(PrepareThreadFor("coded", LocalPlace()),
            absl::FailedPreconditionError("not 7"));
}

TEST(AutoGroupTest, OneRankGroups) {
  CommOptions options;
  options.timeout = absl::Seconds(10);
  for (const char* backend : {"auto", "shm"}) {
    auto made = CreateGroupCommunicator(
        backend, std::make_shared<InMemoryStore>(), 0, 1, options, {});
    ASSERT_TRUE(made.ok()) << backend << ": " << made.status();
    EXPECT_EQ((*made)->backend(), "shm") << backend;
    EXPECT_EQ((*made)->size(), 1);
  }
  // A host key given: the same on one rank.
  auto keyed = CreateGroupCommunicator(
      "auto", std::make_shared<InMemoryStore>(), 0, 1, options, {"host-a"});
  ASSERT_TRUE(keyed.ok()) << keyed.status();
  EXPECT_EQ((*keyed)->backend(), "shm");
  // A member whose host is not known while others' are (an empty key): not
  // taken as one host, so no shared memory: the cross-host backend.
  auto apart = CreateGroupCommunicator(
      "auto", std::make_shared<InMemoryStore>(), 0, 1, options, {""});
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ((*apart)->backend(), "ucx");
  // Any other name is the registry's.
  auto unknown = CreateGroupCommunicator(
      "nope", std::make_shared<InMemoryStore>(), 0, 1, options, {});
  EXPECT_EQ(unknown.status(), CheckBackendLinked("nope"));
}

}  // namespace
}  // namespace devmesh
