// The counting model of group creation (issue 19): what one rank sends to
// the store to create its mesh groups, for sizes no machine here can run.
// One rank of a 3-d mesh of 2^10 and of 2^17 ranks creates its groups over
// an in-memory store, through a model transport registered as "model": it
// makes no socket and moves, through the store it is given, what Gloo's
// group connection moves (comm/gloo/gloo_full_mesh.h: one address and one
// endpoint per peer, published for that peer; each peer's entry for this
// rank read back), with the peers' entries answered by the store as if they
// had written them. The test asserts the exact store round trips and bytes
// of each of the rank's groups (MeshRuntime's CountingStore), identical at
// both world sizes for groups of the same size, and that no world
// communicator is made and no key outside the rank's own groups is touched.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/registry.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/members_only_comm.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

// Gloo's TCP pair address: a sockaddr_storage and a sequence number.
constexpr size_t kAddressBytes = 136;
// What a peer publishes as its connection's endpoint, "[ip]:port".
constexpr absl::string_view kEndpoint = "[10.231.9.101]:40123";

// A store whose absent keys read as if the peer that owns them had written
// them (an address or an endpoint of the real sizes), so that one rank can
// run its side of a group's creation alone. Records every key touched.
class PeersPresentStore : public InMemoryStore {
 public:
  using InMemoryStore::Get;
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override {
    std::vector<std::string> out;
    for (const std::string& key : keys) {
      touched.insert(key);
      auto present = InMemoryStore::Check({key});
      if (present.ok() && *present) {
        out.push_back(*InMemoryStore::Get(key, timeout));
      } else if (absl::StrContains(key, "/addr/")) {
        out.push_back(std::string(kAddressBytes, 'a'));
      } else {
        out.push_back(std::string(kEndpoint));
      }
    }
    return out;
  }
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    for (const std::string& key : keys) touched.insert(key);
    return InMemoryStore::MultiSet(keys, values);
  }
  std::set<std::string> touched;
};


// Gloo's connection protocol, store side only (4 round trips for size > 1).
absl::StatusOr<std::unique_ptr<Communicator>> ModelConnect(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options) {
  if (size > 1) {
    for (absl::string_view kind : {"addr", "up"}) {
      std::vector<std::string> mine, theirs, values;
      for (int i = 0; i < size; ++i) {
        if (i == rank) continue;
        mine.push_back(absl::StrCat(kind, "/", rank, "/", i));
        theirs.push_back(absl::StrCat(kind, "/", i, "/", rank));
        values.push_back(kind == "addr" ? std::string(kAddressBytes, 'a')
                                        : std::string(kEndpoint));
      }
      if (absl::Status s = store->MultiSet(mine, values); !s.ok()) return s;
      auto got = store->MultiGet(theirs, options.timeout);
      if (!got.ok()) return got.status();
    }
  }
  return std::unique_ptr<Communicator>(
      new testing::MembersOnlyComm("model", rank, options.global_ranks));
}

struct Cost {
  int64_t round_trips = 0;
  int64_t bytes = 0;
  int64_t size = 0;
  bool operator==(const Cost& o) const {
    return round_trips == o.round_trips && bytes == o.bytes && size == o.size;
  }
};

// Rank `rank` of an (outer, 16, 8) mesh creates its three groups, in the
// order tp, sp, dp; returns what each cost. Checks that no world is made
// and that every key touched is one of its groups'.
std::vector<Cost> CreateGroups(int64_t outer, int rank) {
  auto store = std::make_shared<PeersPresentStore>();
  const int world = static_cast<int>(outer * 16 * 8);
  auto runtime = *MeshRuntime::Create(store, rank, world, 0);
  // The other ranks are modelled by the store: none makes the mesh.
  runtime->SkipMeshAgreementForTesting();
  MeshOptions options;
  options.all.backend = "model";
  auto mesh = InitDeviceMesh(runtime, "cpu", {outer, 16, 8},
                             {"dp", "sp", "tp"}, options);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  std::vector<Cost> costs;
  for (const char* dim : {"tp", "sp", "dp"}) {
    const int64_t trips = runtime->store_round_trips();
    const int64_t bytes = runtime->store_bytes();
    auto group = mesh->GetGroup(dim);
    EXPECT_TRUE(group.ok()) << group.status();
    if (!group.ok()) return costs;
    // The members are the layout's line through the rank.
    auto line = mesh->layout().GroupOf(rank, *mesh->layout().DimIndex(dim));
    EXPECT_EQ((*group)->global_ranks(),
              std::vector<int>(line->begin(), line->end()));
    costs.push_back(Cost{runtime->store_round_trips() - trips,
                         runtime->store_bytes() - bytes, (*group)->size()});
  }
  EXPECT_EQ(runtime->world_communicators(), 0);
  EXPECT_EQ(runtime->group_creations(), 3);
  for (const std::string& key : store->touched) {
    EXPECT_TRUE(absl::StartsWith(key, "devmesh/group/")) << key;
  }
  // O(group size) keys: each group's 2 x (size - 1) written and read.
  EXPECT_EQ(store->touched.size(), 4u * (8 - 1 + 16 - 1 + outer - 1));
  return costs;
}

class GroupCreationCount : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(RegisterBackend("model", ModelConnect).ok());
  }
};

TEST_F(GroupCreationCount, PerRankCostIsTheSameAtTwoToTheTenAndTheSeventeen) {
  // 2^10 = 8 x 16 x 8 and 2^17 = 1024 x 16 x 8. Ranks at the same
  // (sp, tp) coordinates in both (a group's keys name group ranks, so their
  // digits count): (4, 0, 5) / (546, 0, 5), and the last rank of each.
  struct Pick {
    int small_rank, large_rank;
    int64_t tp_bytes, sp_bytes, small_dp_bytes, large_dp_bytes;
  };
  for (const Pick& p : {Pick{517, 69893, 3304, 7104, 3304, 498880},
                        Pick{1023, 131071, 3304, 7160, 3304, 502968}}) {
    std::vector<Cost> small = CreateGroups(8, p.small_rank);
    std::vector<Cost> large = CreateGroups(1024, p.large_rank);
    ASSERT_EQ(small.size(), 3u);
    ASSERT_EQ(large.size(), 3u);
    // tp (8 ranks) and sp (16 ranks): identical at both world sizes, and
    // exactly: 4 round trips; 2 x (size - 1) keys written and read, each
    // with its address or endpoint.
    EXPECT_EQ(small[0], large[0]) << "tp, rank " << p.small_rank;
    EXPECT_EQ(small[1], large[1]) << "sp, rank " << p.small_rank;
    EXPECT_EQ(small[0].round_trips, 4);
    EXPECT_EQ(small[1].round_trips, 4);
    EXPECT_EQ(small[0].bytes, p.tp_bytes) << "tp";
    EXPECT_EQ(small[1].bytes, p.sp_bytes) << "sp";
    // dp is as large as the mesh's outer dim (8 vs 1024 ranks): still 4
    // round trips, bytes linear in its size.
    EXPECT_EQ(small[2].round_trips, 4);
    EXPECT_EQ(large[2].round_trips, 4);
    EXPECT_EQ(small[2].size, 8);
    EXPECT_EQ(large[2].size, 1024);
    EXPECT_EQ(small[2].bytes, p.small_dp_bytes) << "dp of 8";
    EXPECT_EQ(large[2].bytes, p.large_dp_bytes) << "dp of 1024";
  }
}

}  // namespace
}  // namespace devmesh
