// R14 text, LayoutString, equality and hash (R15), serialization (R16) with
// corrupt and truncated input.
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/hash/hash_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"
#include "tests/mesh/reference_mesh.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Ok;
using ::testing::HasSubstr;

TEST(Text, DeviceMeshRepr) {
  EXPECT_EQ(Ok(MeshLayout::FromShape({2, 4}, {"dp", "tp"})).ToString("cuda"),
            "DeviceMesh(dp=2, tp=4, 'cuda')");
  EXPECT_EQ(Ok(MeshLayout::FromShape({2, 4})).ToString("cuda"),
            "DeviceMesh((2, 4), 'cuda')");
  EXPECT_EQ(Ok(MeshLayout::FromShape({8})).ToString("cpu"),
            "DeviceMesh((8,), 'cpu')");
  EXPECT_EQ(Ok(MeshLayout::FromRankTable({{3, 1}, {0, 2}})).ToString("cuda"),
            "DeviceMesh((2, 2), 'cuda')");
}

TEST(Equality, SameRanksWhateverThePath) {
  MeshLayout flat8 = Ok(MeshLayout::FromShape({8}, {"x"}));
  MeshLayout from2d =
      Ok(Ok(MeshLayout::FromShape({2, 4}, {"a", "b"})).Flatten("x"));
  MeshLayout table = Ok(MeshLayout::FromRanks({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {"x"}));
  MeshLayout strides = Ok(MeshLayout::FromStrides({2, 4}, {4, 1}, 0, {"a", "b"}));
  MeshLayout padded = Ok(MeshLayout::FromStrides({2, 4}, {5, 1}, 0, {"a", "b"}));
  EXPECT_EQ(flat8, from2d);
  EXPECT_EQ(flat8, table);
  EXPECT_EQ(table, from2d);
  EXPECT_EQ(Ok(strides.Flatten("x")), flat8);
  EXPECT_NE(Ok(padded.Flatten("x")), flat8);
  EXPECT_EQ(Ok(padded.Slice({"b"}, {1, 0})),
            Ok(MeshLayout::FromRanks({5, 6, 7, 8}, {4}, {"b"})));
  EXPECT_EQ(Ok(padded.Slice({"b"}, {1, 0})),
            Ok(MeshLayout::FromStrides({4}, {1}, 5, {"b"})));
  // Names and shape count (R15).
  EXPECT_NE(flat8, Ok(MeshLayout::FromShape({8}, {"y"})));
  EXPECT_NE(flat8, Ok(MeshLayout::FromShape({8})));
  EXPECT_NE(Ok(MeshLayout::FromShape({2, 4})), Ok(MeshLayout::FromShape({4, 2})));
  EXPECT_NE(Ok(MeshLayout::FromRanks({1, 0}, {2})), Ok(MeshLayout::FromShape({2})));
  EXPECT_TRUE(absl::VerifyTypeImplementsAbslHashCorrectly({
      flat8, from2d, table, Ok(strides.Flatten("x")),
      Ok(MeshLayout::FromShape({8}, {"y"})), Ok(MeshLayout::FromShape({8})),
      Ok(MeshLayout::FromShape({2, 4})), Ok(MeshLayout::FromShape({4, 2})),
      Ok(MeshLayout::FromRanks({1, 0}, {2})), Ok(padded.Slice({"b"}, {1, 0})),
  }));
}

TEST(Serialize, RoundTripsEveryKind) {
  const std::vector<MeshLayout> layouts = {
      Ok(MeshLayout::FromShape({2, 1, 4}, {"a", "b", "c"})),
      Ok(Ok(Ok(MeshLayout::FromShape({2, 3, 4}, {"a", "b", "c"}))
                .Slice({"c", "a"}, {1, 2, 0}))
             .Flatten()),
      Ok(MeshLayout::FromRankTable({{9, 1}, {4, 2}})),
      Ok(MeshLayout::FromStrides({3, 2}, {7, 2}, 11, {"p", "q"})),
  };
  for (const MeshLayout& m : layouts) {
    MeshLayout back = Ok(MeshLayout::Deserialize(m.Serialize()));
    EXPECT_EQ(back, m);
    EXPECT_EQ(back.LayoutString(), m.LayoutString());
    EXPECT_EQ(back.root_dims(), m.root_dims());
    EXPECT_EQ(back.RootLayout(), m.RootLayout());
    EXPECT_TRUE(back.SameRoot(m));
  }
}

TEST(Serialize, CorruptAndTruncatedInputIsAnError) {
  MeshLayout m = Ok(Ok(MeshLayout::FromRankTable(
                           {{{7, 6}, {5, 4}}, {{3, 2}, {1, 0}}}, {"a", "b", "c"}))
                        .Slice({"c", "a"}, {0, 1, 0}));
  const std::string bytes = m.Serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<MeshLayout> r = MeshLayout::Deserialize(bytes.substr(0, n));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  EXPECT_EQ(MeshLayout::Deserialize(bytes + "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string wrong_version = bytes;
  wrong_version[4] = 9;
  absl::Status v = MeshLayout::Deserialize(wrong_version).status();
  EXPECT_EQ(v.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.message()), HasSubstr("version 9"));
  // Every single-byte change either fails cleanly or gives a valid layout.
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int delta : {1, 0x40, 0x80, 0xff}) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] + delta);
      absl::StatusOr<MeshLayout> r = MeshLayout::Deserialize(b);
      if (r.ok()) {
        EXPECT_EQ(static_cast<int64_t>(r->RankTable().size()), r->numel());
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      }
    }
  }
  // A huge count must not allocate: "DMLY" 1, kind 2, ndim 1, size 1, no
  // names, then a rank count of 2^62.
  std::string huge = "DMLY";
  huge += '\x01';
  huge += '\x02';
  huge += '\x01';
  huge += '\x01';
  huge += '\x00';
  huge += std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x40", 9);
  EXPECT_EQ(MeshLayout::Deserialize(huge).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A strided root with non-separable strides is not materialised from
  // bytes: kind 1, ndim 2, sizes (3, 2), no names, strides (2, 3), offset 0.
  std::string affine = "DMLY";
  affine += std::string("\x01\x01\x02\x03\x02\x00\x02\x03\x00", 9);
  affine += std::string("\x00\x01\x01\x06\x01\x01\x00\x00", 8);
  absl::Status a = MeshLayout::Deserialize(affine).status();
  EXPECT_EQ(a.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.message()), HasSubstr("(3,2):(2,3)+0"));
  // Modes that are not sub-modes of the root are rejected.
  std::string bad = Ok(MeshLayout::FromShape({6})).Serialize();
  // layout: offset 0, ndim 1, nmodes 1, mode 6:1 -> patch size 6 to 4.
  const size_t pos = bad.find(std::string("\x01\x06\x01", 3), 8);
  ASSERT_NE(pos, std::string::npos);
  bad[pos + 1] = 4;
  absl::Status s = MeshLayout::Deserialize(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("4:1"));
}

}  // namespace
}  // namespace devmesh
