// Jobs whose store is an etcd cluster (DEVMESH_STORE_ADDR=etcd://..., here
// RunRanksOptions::store_address): a 3-member etcd on 127.0.0.1, started by
// the suite, and real rank processes.
//   mesh_collectives     4 ranks, InitDeviceMesh (dp=2, tp=2): every dim's
//                        group and all-reduce / all-gather exact (CheckAllDims)
//   kill_and_shrink      the worked elastic example on (dp=2, tp=2); rank 2
//                        SIGKILLs itself at step kKillStep: ranks 0 and 1
//                        finish every step with parameters equal to a fresh
//                        run's, rank 3 is removed in epoch 1, the rendezvous,
//                        the failure watch's leases and Shrink's agreement
//                        all over etcd
//   kill_etcd_member     as kill_and_shrink, and etcd member 0 (the one every
//                        rank asks first) is SIGKILLed at the start of
//                        training: the job goes on over the other two
//   etcd_down_at_start   no etcd at the address: Bootstrap fails Unavailable
//                        naming both endpoints, within its timeout
//   shared_prefix        a second job on the prefix of one that completed its
//                        rendezvous is refused (FailedPrecondition), as on a
//                        TCP store, naming the key prefix
// --etcd_runs sets the launches of each multi-process scenario (CI: 1).
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_runtime.h"
#include "examples/elastic/elastic_training.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"
#include "tests/store/etcd_testing.h"

ABSL_FLAG(int, etcd_runs, 1, "launches of each multi-process scenario");

namespace devmesh {
namespace {

using ::devmesh::elastic_example::Point;
using ::devmesh::elastic_example::Reference;
using ::devmesh::elastic_example::TrainOptions;
using ::devmesh::testing::EtcdCluster;
using ::devmesh::testing::Expect;
using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;
using ::testing::HasSubstr;

constexpr int kRanks = 4;
constexpr int64_t kSteps = 16;
constexpr int64_t kKillStep = 6;
constexpr int kVictim = 2;

class EtcdMeshTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    etcd_ = new EtcdCluster();
    *start_ = etcd_->Start(3);
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_->ok()) << *start_; }

  // A key prefix of this launch's own.
  static std::string Prefix(const std::string& name, int run) {
    return absl::StrCat("/devmesh-test/", name, "/", getpid(), "/", run, "/");
  }

  static RunRanksOptions Options(const std::string& prefix) {
    RunRanksOptions options;
    options.timeout = absl::Seconds(90);
    options.bootstrap_timeout = absl::Seconds(30);
    options.store_address = etcd_->Address(prefix);
    return options;
  }

  static EtcdCluster* etcd_;
  static absl::Status* start_;
};

EtcdCluster* EtcdMeshTest::etcd_ = nullptr;
absl::Status* EtcdMeshTest::start_ = new absl::Status();

std::string Describe(const std::vector<RankOutcome>& outcomes) {
  std::vector<std::string> lines;
  for (const RankOutcome& o : outcomes) {
    lines.push_back(absl::StrCat("rank ", o.rank, ": ", o.status.ToString(),
                                 o.reported ? "" : " (not reported)",
                                 " exit ", o.exit_code));
  }
  return absl::StrJoin(lines, "\n");
}

TEST_F(EtcdMeshTest, MeshCollectives) {
  const int runs = absl::GetFlag(FLAGS_etcd_runs);
  int failures = 0;
  absl::Duration slowest;
  for (int run = 0; run < runs; ++run) {
    const absl::Time start = absl::Now();
    std::vector<RankOutcome> outcomes = RunRanksDetailed(
        kRanks,
        [](Bootstrap& b) -> absl::Status {
          RETURN_IF_ERROR(Expect(
              absl::StartsWith(b.self().store, "etcd://"),
              absl::StrCat("the store is ", b.self().store, ", not etcd")));
          ASSIGN_OR_RETURN(runtime,
                           MeshRuntime::Create(b.store(), b.rank(),
                                               b.world_size(), b.local_rank()));
          MeshOptions options;
          options.all.timeout = absl::Seconds(30);
          ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2},
                                                {"dp", "tp"}, options));
          return testing::CheckAllDims(mesh);
        },
        Options(Prefix("mesh", run)));
    slowest = std::max(slowest, absl::Now() - start);
    bool ok = true;
    for (const RankOutcome& o : outcomes) ok = ok && o.status.ok();
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "run " << run << ":\n" << Describe(outcomes);
    }
  }
  std::printf("mesh_collectives over etcd: %d launches, %d failures, slowest "
              "%s\n",
              runs, failures, absl::FormatDuration(slowest).c_str());
}

// The elastic example; rank kVictim dies at kKillStep. With `kill_member`,
// rank 0 SIGKILLs etcd member 0 at step 2 (every rank's first endpoint).
void KillAndShrink(EtcdCluster& etcd, const RunRanksOptions& options,
                   bool kill_member, int run) {
  const pid_t member0 = etcd.pid(0);
  const absl::Time start = absl::Now();
  std::vector<RankOutcome> outcomes = RunRanksDetailed(
      kRanks,
      [&](Bootstrap& b) -> absl::Status {
        const int me = b.rank();
        ASSIGN_OR_RETURN(runtime,
                         MeshRuntime::Create(b.store(), me, b.world_size(),
                                             b.local_rank()));
        MeshOptions mesh_options;
        mesh_options.all.timeout = absl::Seconds(30);
        ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2},
                                              {"dp", "tp"}, mesh_options));
        TrainOptions train;
        train.steps = kSteps;
        train.pad = 1 << 12;
        train.shrink.timeout = absl::Seconds(20);
        auto hook = [&](Point p, int64_t step, int64_t epoch) {
          if (epoch != 0 || p != Point::kBeforeShardAllReduce) return;
          if (kill_member && me == 0 && step == 2) kill(member0, SIGKILL);
          if (me == kVictim && step == kKillStep) raise(SIGKILL);
        };
        ASSIGN_OR_RETURN(result, elastic_example::Train(mesh, train, hook));
        if (me == 3) {
          return Expect(
              absl::StrContains(result.left_because, "was removed in epoch 1"),
              absl::StrCat("rank 3 (of the lost replica): '",
                           result.left_because, "'"));
        }
        RETURN_IF_ERROR(Expect(result.left_because.empty(),
                               absl::StrCat("rank ", me, " left: ",
                                            result.left_because)));
        RETURN_IF_ERROR(Expect(
            result.steps == kSteps && result.epoch == 1 &&
                result.recoveries.size() == 1 &&
                result.recoveries[0].replicas == 1 &&
                result.recoveries[0].report.dead == std::vector<int>{kVictim},
            absl::StrCat("rank ", me, ": steps ", result.steps, " epoch ",
                         result.epoch, " recoveries ",
                         result.recoveries.size())));
        const std::vector<float> want =
            Reference(result.shards, result.shard, kSteps,
                      {{0, 2}, {result.recoveries[0].resumed_step, 1}});
        return Expect(result.params == want,
                      absl::StrCat("rank ", me, " params [",
                                   absl::StrJoin(result.params, ","),
                                   "], a fresh run gives [",
                                   absl::StrJoin(want, ","), "]"));
      },
      options);
  const absl::Duration took = absl::Now() - start;
  std::vector<std::string> bad;
  for (const RankOutcome& o : outcomes) {
    if (o.rank == kVictim) {
      if (o.reported) bad.push_back("the victim reported a status");
    } else if (!o.status.ok()) {
      bad.push_back(absl::StrCat("rank ", o.rank, ": ", o.status.ToString()));
    }
  }
  EXPECT_TRUE(bad.empty()) << "run " << run << " (" << took << "):\n"
                           << absl::StrJoin(bad, "\n") << "\n"
                           << Describe(outcomes);
  std::printf("run %d: %s in %s\n", run, bad.empty() ? "exact" : "FAILED",
              absl::FormatDuration(took).c_str());
}

TEST_F(EtcdMeshTest, KillAndShrink) {
  for (int run = 0; run < absl::GetFlag(FLAGS_etcd_runs); ++run) {
    KillAndShrink(*etcd_, Options(Prefix("shrink", run)), false, run);
  }
}

// Last of the suite's multi-process tests: it leaves 2 of 3 members.
TEST_F(EtcdMeshTest, ZKillEtcdMemberDuringTraining) {
  // Once: the cluster keeps quorum with one member gone, not with two.
  KillAndShrink(*etcd_, Options(Prefix("member", 0)), true, 0);
}

TEST_F(EtcdMeshTest, SharedPrefixIsRefused) {
  const std::string prefix = Prefix("shared", 0);
  auto body = [](Bootstrap&) { return absl::OkStatus(); };
  std::vector<RankOutcome> first = RunRanksDetailed(2, body, Options(prefix));
  ASSERT_TRUE(first[0].status.ok() && first[1].status.ok())
      << Describe(first);
  std::vector<RankOutcome> second = RunRanksDetailed(2, body, Options(prefix));
  for (const RankOutcome& o : second) {
    EXPECT_EQ(o.status.code(), absl::StatusCode::kFailedPrecondition)
        << Describe(second);
    EXPECT_THAT(o.status.message(),
                HasSubstr("another job is using this store"));
    EXPECT_THAT(o.status.message(),
                HasSubstr(absl::StrCat("give this job a key prefix of its own "
                                       "(DEVMESH_STORE_ADDR=etcd://host:port/"
                                       "<prefix>), or delete that job's keys "
                                       "once it has ended (etcdctl del "
                                       "--prefix <prefix>; etcd keeps a job's "
                                       "keys); store ",
                                       etcd_->Address(prefix))));
  }
}

}  // namespace

// Not a fixture: no etcd at all.
TEST(EtcdStoreAddress, EtcdDownAtStart) {
  const int a = testing::FreeLoopbackPort();
  const int b = testing::FreeLoopbackPort();
  ASSERT_TRUE(a > 0 && b > 0 && a != b);
  RendezvousInfo info;
  info.rank = 0;
  info.world_size = 2;
  info.local_world_size = 2;
  const std::string address =
      absl::StrCat("etcd://127.0.0.1:", a, ",127.0.0.1:", b, "/job/");
  ASSERT_TRUE(UseStoreAddress(address, info).ok());
  BootstrapOptions options;
  options.timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Bootstrap>> boot =
      Bootstrap::Create(info, options);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(boot.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(boot.status().message(),
              HasSubstr(absl::StrCat("no member of the etcd store ", address,
                                     " answered within ")));
  EXPECT_THAT(boot.status().message(),
              HasSubstr(absl::StrCat("127.0.0.1:", a, " (")));
  EXPECT_THAT(boot.status().message(),
              HasSubstr(absl::StrCat("127.0.0.1:", b, " (")));
  EXPECT_GE(took, absl::Seconds(2));
  EXPECT_LT(took, absl::Seconds(4)) << boot.status();
}

}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
