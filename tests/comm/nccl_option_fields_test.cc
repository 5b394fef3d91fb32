// devmesh/tests/comm/nccl_option_fields_test.cc
// NcclOptions as named fields (comm/nccl/nccl_option_fields.h) and the
// generic field strings (comm/option_fields.h): exact texts, the round trip
// through NcclOptionsFromAgreedFields, and each refusal.
#include "comm/nccl/nccl_option_fields.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "comm/option_fields.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

NcclOptions Configured() {
  NcclOptions n;
  n.blocking = 0;
  n.split_share = 1;
  n.cga_cluster_size = 2;
  n.min_ctas = 4;
  n.max_ctas = 16;
  n.net_name = "Socket";
  n.cuda_device = 3;
  n.synchronize = false;
  return n;
}

TEST(NcclOptionFieldsTest, AgreedFieldsInTheirOrder) {
  const std::vector<OptionField> fields = NcclAgreedFields(Configured());
  EXPECT_EQ(OptionFieldsString(fields),
            "blocking=0, split_share=1, cga_cluster_size=2, min_ctas=4, "
            "max_ctas=16, net_name='Socket'");
  EXPECT_EQ(OptionFieldValues(fields), "0,1,2,4,16,Socket");
  EXPECT_EQ(OptionFieldsString(NcclAgreedFields(NcclOptions())),
            "blocking=1, split_share=0, cga_cluster_size=-1, min_ctas=-1, "
            "max_ctas=-1, net_name=''");
  EXPECT_EQ(OptionFieldValues(NcclAgreedFields(NcclOptions())),
            "1,0,-1,-1,-1,");
}

TEST(NcclOptionFieldsTest, LocalFields) {
  NcclOptions n = Configured();
  EXPECT_EQ(NcclLocalFieldsString(n),
            "stream=0, synchronize=0, cuda_device=3");
  n.stream = reinterpret_cast<void*>(uintptr_t{0x7f12ab00});
  EXPECT_EQ(NcclLocalFieldsString(n),
            "stream=7f12ab00, synchronize=0, cuda_device=3");
}

TEST(NcclOptionFieldsTest, RoundTripKeepsAgreedFieldsOnly) {
  absl::StatusOr<NcclOptions> back =
      NcclOptionsFromAgreedFields(NcclAgreedFields(Configured()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->blocking, 0);
  EXPECT_EQ(back->split_share, 1);
  EXPECT_EQ(back->cga_cluster_size, 2);
  EXPECT_EQ(back->min_ctas, 4);
  EXPECT_EQ(back->max_ctas, 16);
  EXPECT_EQ(back->net_name, "Socket");
  // The fields each member sets for itself keep their defaults.
  EXPECT_EQ(back->cuda_device, -1);
  EXPECT_EQ(back->stream, nullptr);
  EXPECT_TRUE(back->synchronize);
}

TEST(NcclOptionFieldsTest, RefusesFieldsThatDoNotMatch) {
  const std::vector<OptionField> good = NcclAgreedFields(Configured());

  std::vector<OptionField> short_list(good.begin(), good.end() - 1);
  absl::StatusOr<NcclOptions> got = NcclOptionsFromAgreedFields(short_list);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "NCCL options: 5 fields, expected 6");

  std::vector<OptionField> renamed = good;
  renamed[2].name = "cga";
  got = NcclOptionsFromAgreedFields(renamed);
  EXPECT_EQ(got.status().message(),
            "NCCL options: field 2 is 'cga' (number), expected "
            "'cga_cluster_size' (number)");

  std::vector<OptionField> kind = good;
  kind[5].is_text = false;
  got = NcclOptionsFromAgreedFields(kind);
  EXPECT_EQ(got.status().message(),
            "NCCL options: field 5 is 'net_name' (number), expected "
            "'net_name' (text)");

  std::vector<OptionField> big = good;
  big[3].number = int64_t{std::numeric_limits<int>::max()} + 1;
  got = NcclOptionsFromAgreedFields(big);
  EXPECT_EQ(got.status().message(),
            "NCCL options: min_ctas = 2147483648 is outside int's range");
  big[3].number = int64_t{std::numeric_limits<int>::min()};
  EXPECT_TRUE(NcclOptionsFromAgreedFields(big).ok());
}

}  // namespace
}  // namespace devmesh
