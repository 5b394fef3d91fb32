// The store with real processes (RunRanks): exact sums, one compare-set
// winner, rendezvous, a rank killed during rendezvous.
#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "bootstrap/bootstrap.h"
#include "store/socket.h"
#include "bootstrap/testing/multiprocess.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanks;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;

TEST(MultiProcessStoreTest, EightProcessesEachReadEveryKey) {
  absl::Status s = RunRanks(8, [](Bootstrap& b) -> absl::Status {
    auto store = b.store();
    absl::Status set = store->Set(absl::StrCat("key/", b.rank()),
                                  absl::StrCat("value-", b.rank()));
    if (!set.ok()) return set;
    for (int r = 0; r < b.world_size(); ++r) {
      absl::StatusOr<std::string> v = store->Get(absl::StrCat("key/", r));
      if (!v.ok()) return v.status();
      if (*v != absl::StrCat("value-", r)) {
        return absl::InternalError(absl::StrCat("key/", r, " is ", *v));
      }
    }
    return b.Barrier("end");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiProcessStoreTest, AddsGiveExactSum) {
  constexpr int kProcs = 6, kAdds = 300;
  absl::Status s = RunRanks(kProcs, [](Bootstrap& b) -> absl::Status {
    for (int i = 0; i < kAdds; ++i) {
      absl::StatusOr<int64_t> v = b.store()->Add("sum", 1);
      if (!v.ok()) return v.status();
    }
    if (absl::Status st = b.Barrier("added"); !st.ok()) return st;
    absl::StatusOr<std::string> total = b.store()->Get("sum");
    if (!total.ok()) return total.status();
    if (*total != absl::StrCat(kProcs * kAdds)) {
      return absl::InternalError(absl::StrCat("sum is ", *total));
    }
    return b.Barrier("checked");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiProcessStoreTest, RacingCompareSetsHaveExactlyOneWinner) {
  constexpr int kProcs = 8;
  absl::Status s = RunRanks(kProcs, [](Bootstrap& b) -> absl::Status {
    const std::string me = absl::StrCat("rank-", b.rank());
    absl::StatusOr<std::string> now = b.store()->CompareSet("leader", "", me);
    if (!now.ok()) return now.status();
    if (*now == me) {
      if (absl::StatusOr<int64_t> w = b.store()->Add("winners", 1); !w.ok()) {
        return w.status();
      }
    }
    if (absl::Status st = b.Barrier("raced"); !st.ok()) return st;
    absl::StatusOr<std::string> winners = b.store()->Get("winners");
    if (!winners.ok()) return winners.status();
    if (*winners != "1") {
      return absl::InternalError(absl::StrCat(*winners, " winners"));
    }
    return b.Barrier("checked");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiProcessStoreTest, RankKilledDuringRendezvousMakesOthersFail) {
  RunRanksOptions options;
  options.timeout = absl::Seconds(60);
  options.bootstrap_timeout = absl::Seconds(2);  // the barrier's timeout
  std::vector<RankOutcome> outcomes =
      RunRanksDetailed(4, [](Bootstrap& b) -> absl::Status {
        if (b.rank() == 2) raise(SIGKILL);
        if (absl::Status s = b.store()->Set(absl::StrCat("r", b.rank()), "x");
            !s.ok()) {
          return s;
        }
        return b.store()->Wait({"r0", "r1", "r2", "r3"});
      }, options);
  ASSERT_EQ(outcomes.size(), 4u);
  for (const RankOutcome& o : outcomes) {
    if (o.rank == 2) {
      EXPECT_EQ(o.status.code(), absl::StatusCode::kInternal) << o.status;
      EXPECT_NE(o.status.message().find("signal 9"), std::string::npos);
    } else {
      EXPECT_EQ(o.status.code(), absl::StatusCode::kDeadlineExceeded)
          << "rank " << o.rank << ": " << o.status;
      EXPECT_NE(o.status.message().find("r2"), std::string::npos) << o.status;
    }
  }
}

TEST(MultiProcessStoreTest, RunRanksNamesFailingRanks) {
  absl::Status s = RunRanks(3, [](Bootstrap& b) -> absl::Status {
    if (b.rank() == 1) return absl::NotFoundError("no such thing");
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "1 of 3 ranks failed: rank 1: NOT_FOUND: no such thing");
}

TEST(MultiProcessStoreTest, RankZeroHostsTheServerWithRealBootstrap) {
  // Not through RunRanks: every rank builds a full Bootstrap, rank 0 hosting.
  absl::StatusOr<Socket> probe = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok());
  const int port = *probe->LocalPort();
  probe->Close();
  RunRanksOptions options;
  // RunRanks only provides the processes here; the body makes its own store.
  std::vector<RankOutcome> outcomes =
      RunRanksDetailed(4, [port](Bootstrap& outer) -> absl::Status {
        RendezvousInfo info;
        info.rank = outer.rank();
        info.world_size = outer.world_size();
        info.local_rank = outer.rank();
        info.local_world_size = outer.world_size();
        info.store_host = "127.0.0.1";
        info.store_port = port;
        BootstrapOptions boot_options;
        boot_options.timeout = absl::Seconds(20);
        boot_options.token = "t0ken";
        auto boot = Bootstrap::Create(info, boot_options);
        if (!boot.ok()) return boot.status();
        auto got = (*boot)->store()->Add("joined", 1);
        if (!got.ok()) return got.status();
        if (absl::Status s = (*boot)->Barrier("joined"); !s.ok()) return s;
        auto n = (*boot)->store()->Get("joined");
        if (!n.ok()) return n.status();
        if (*n != "4") return absl::InternalError(absl::StrCat("joined=", *n));
        return absl::OkStatus();  // rank 0 waits in ~Bootstrap for the others
      }, options);
  for (const RankOutcome& o : outcomes) {
    EXPECT_TRUE(o.status.ok()) << "rank " << o.rank << ": " << o.status;
  }
}

}  // namespace
}  // namespace devmesh
