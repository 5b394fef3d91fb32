// devmesh/tests/comm/gloo_chaos_test.cc
// -----------------------------------------------------------------------------
// Chaos scenarios of issue 11 on Gloo groups, in real processes (the parent
// hosts the store, so it outlives any rank):
// - never_joins_split / never_joins_world: one rank stays alive but never
//   calls Split (or CreateGlooCommunicator); every other rank must get
//   DeadlineExceeded within the 5 s group timeout plus the margin.
// - sigkill_during_{creation,collective,teardown}: one random rank SIGKILLs
//   itself at a random moment of that phase. Every survivor must end by
//   itself (exit codes prove no signal killed it), each failing call within
//   the timeout plus the margin, with a Status naming a peer's global rank.
// Each scenario runs --chaos_runs launches (default 3, CI) and prints
// launches, failures and the slowest launch; by hand:
//   bazel test //tests/comm:gloo_chaos_test --test_arg=--chaos_runs=30
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/gloo/gloo_communicator.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, chaos_runs, 3, "launches per chaos scenario");

namespace devmesh {
namespace {

using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;

constexpr int kRanks = 4;
// All-reduces per launch in the kill scenarios (the collective-phase kill is
// armed before a random one of them).
constexpr int kCollectives = 40;
constexpr absl::Duration kTimeout = absl::Seconds(5);
// The documented margin is 10 ms per pair plus a store round trip; allow
// for a loaded 2-core machine running 4 ranks.
const absl::Duration kBound = kTimeout + absl::Seconds(2);

// Runs `call`; an error that took longer than kBound becomes Internal (the
// test then fails on it).
absl::Status Timed(absl::string_view what,
                   const std::function<absl::Status()>& call) {
  const absl::Time start = absl::Now();
  absl::Status s = call();
  const absl::Duration took = absl::Now() - start;
  if (!s.ok() && took > kBound) {
    return absl::InternalError(absl::StrCat(
        what, " failed after ", absl::FormatDuration(took), " > bound ",
        absl::FormatDuration(kBound), ": ", s.ToString()));
  }
  return s;
}

CommOptions Options() {
  CommOptions options;
  options.timeout = kTimeout;
  options.gloo.hostname = "127.0.0.1";
  return options;
}

// Launch outcome checks. `victim` (or -1) died on purpose; every other rank
// must have reported; `check` judges each survivor's status.
struct Tally {
  int launches = 0;
  int failures = 0;
  int survivor_errors = 0;  // survivors that ended with a (correct) error
  absl::Duration slowest;
  std::string text;
};

void RunLaunches(
    const std::string& name, Tally& tally,
    const std::function<std::pair<int, std::function<absl::Status(Bootstrap&)>>(
        absl::BitGen&)>& make,
    const std::function<std::string(const RankOutcome&)>& check) {
  absl::BitGen gen;
  const int runs = absl::GetFlag(FLAGS_chaos_runs);
  RunRanksOptions options;
  options.timeout = absl::Seconds(60);
  options.bootstrap_timeout = absl::Seconds(30);
  for (int run = 0; run < runs; ++run) {
    auto [victim, body] = make(gen);
    const absl::Time start = absl::Now();
    std::vector<RankOutcome> outcomes = RunRanksDetailed(kRanks, body, options);
    tally.slowest = std::max(tally.slowest, absl::Now() - start);
    ++tally.launches;
    bool ok = true;
    for (const RankOutcome& o : outcomes) {
      std::string problem;
      if (o.rank == victim) {
        if (o.reported || o.exit_code != -1) {
          problem = absl::StrCat("victim was not killed: ", o.status.ToString());
        }
      } else if (!o.reported || (o.exit_code != 0 && o.exit_code != 1)) {
        problem = absl::StrCat("survivor did not end by itself (exit code ",
                               o.exit_code, "): ", o.status.ToString());
      } else {
        problem = check(o);
        if (!o.status.ok() && o.rank != victim) ++tally.survivor_errors;
      }
      if (problem.empty()) continue;
      ok = false;
      if (tally.text.size() < 4000) {
        absl::StrAppend(&tally.text, name, " launch ", run, " rank ", o.rank,
                        ": ", problem, "\n");
      }
    }
    if (!ok) ++tally.failures;
  }
  std::printf(
      "chaos %-34s launches %3d failures %3d slowest %s (rank errors %d)\n",
      name.c_str(), tally.launches, tally.failures,
      absl::FormatDuration(tally.slowest).c_str(), tally.survivor_errors);
  std::fflush(stdout);
}

std::string ExpectDeadline(const RankOutcome& o) {
  if (absl::IsDeadlineExceeded(o.status)) return "";
  return absl::StrCat("want DeadlineExceeded, got ", o.status.ToString());
}

// A survivor either finished (the kill came after its last call) or failed
// with a Status that names a peer's global rank.
std::string ExpectOkOrPeerNamed(const RankOutcome& o) {
  if (o.status.ok()) return "";
  if (absl::IsInternal(o.status)) return o.status.ToString();
  if (!absl::StrContains(o.status.message(), "global rank")) {
    return absl::StrCat("no peer named: ", o.status.ToString());
  }
  return "";
}

// The idle rank of the never_joins scenarios: stays alive (and never joins)
// until the others are done, at most kBound + 1 s. Its status is
// DeadlineExceeded so that the launch check treats every rank alike.
absl::Status WaitForOthers(Bootstrap& b) {
  const absl::Time end = absl::Now() + kBound + absl::Seconds(1);
  while (absl::Now() < end) {
    auto done = b.store()->Add("others_done", 0);
    if (done.ok() && *done >= kRanks - 1) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("idle rank (not checked)");
}

// `s` unless it is a DeadlineExceeded whose message lacks `want` (the
// missing rank must be named): then an Internal error saying so.
absl::Status DeadlineNames(const absl::Status& s, const std::string& want) {
  if (absl::IsDeadlineExceeded(s) && !absl::StrContains(s.message(), want)) {
    return absl::InternalError(
        absl::StrCat("message lacks '", want, "': ", s.ToString()));
  }
  return s;
}

TEST(GlooChaos, NeverJoinsSplit) {
  Tally tally;
  RunLaunches(
      "never_joins_split", tally,
      [](absl::BitGen& gen) {
        const int idle = absl::Uniform(gen, 0, kRanks);
        auto body = [idle](Bootstrap& b) -> absl::Status {
          auto world = CreateGlooCommunicator(b.store(), b.rank(),
                                              b.world_size(), Options());
          if (!world.ok()) return world.status();
          if (b.rank() == idle) {
            // Alive, holding its world connections, but never splitting.
            return WaitForOthers(b);
          }
          absl::Status s = Timed("split", [&] {
            return (*world)->Split(0, b.rank()).status();
          });
          // Keep the world up until every joining rank has its answer: a
          // rank that leaves would turn a slower peer's timeout into a
          // "connection closed" (Unavailable).
          (void)b.store()->Add("others_done", 1);
          (void)WaitForOthers(b);
          return DeadlineNames(
              s, absl::StrCat("global rank(s) [", idle, "] did not call Split"));
        };
        return std::make_pair(-1, std::function<absl::Status(Bootstrap&)>(body));
      },
      ExpectDeadline);
  EXPECT_EQ(tally.failures, 0) << tally.text;
}

TEST(GlooChaos, NeverJoinsWorld) {
  Tally tally;
  RunLaunches(
      "never_joins_world", tally,
      [](absl::BitGen& gen) {
        const int idle = absl::Uniform(gen, 0, kRanks);
        auto body = [idle](Bootstrap& b) -> absl::Status {
          if (b.rank() == idle) return WaitForOthers(b);
          absl::Status s = Timed("create", [&] {
            return CreateGlooCommunicator(b.store(), b.rank(), b.world_size(),
                                          Options())
                .status();
          });
          (void)b.store()->Add("others_done", 1);
          return DeadlineNames(
              s, absl::StrCat("global rank(s) [", idle, "] did not join"));
        };
        return std::make_pair(-1, std::function<absl::Status(Bootstrap&)>(body));
      },
      ExpectDeadline);
  EXPECT_EQ(tally.failures, 0) << tally.text;
}

enum class Phase { kCreation, kCollective, kTeardown };

// Every rank: create the world, split it in two halves, run all-reduces on
// both, destroy both; `arm(phase)` is called as each phase starts.
absl::Status RunPhases(Bootstrap& b, int collective_at,
                       const std::function<void(Phase)>& arm) {
  arm(Phase::kCreation);
  std::unique_ptr<Communicator> world, half;
  absl::Status s = Timed("create world", [&] {
    auto w = CreateGlooCommunicator(b.store(), b.rank(), b.world_size(),
                                    Options());
    if (w.ok()) world = *std::move(w);
    return w.status();
  });
  if (!s.ok()) return s;
  s = Timed("split", [&] {
    auto h = world->Split(b.rank() % 2, b.rank());
    if (h.ok()) half = *std::move(h);
    return h.status();
  });
  if (!s.ok()) return s;
  std::vector<float> buf(4096, 1.0f);
  for (int i = 0; i < kCollectives && s.ok(); ++i) {
    if (i == collective_at) arm(Phase::kCollective);
    Communicator* c = i % 2 ? half.get() : world.get();
    s = Timed("allreduce", [&] {
      return c->AllReduce(buf.data(), buf.data(), buf.size(),
                          DataType::kFloat32, ReduceOp::kMax);
    });
  }
  if (!s.ok()) return s;
  arm(Phase::kTeardown);
  const absl::Time start = absl::Now();
  half.reset();
  world.reset();
  if (absl::Now() - start > kBound) {
    return absl::InternalError("teardown took longer than the bound");
  }
  return absl::OkStatus();
}

// RunPhases, where the victim arms a thread that SIGKILLs it `delay` after
// `phase` starts.
std::function<absl::Status(Bootstrap&)> KillBody(int victim, Phase phase,
                                                 int collective_at,
                                                 absl::Duration delay) {
  return [victim, phase, collective_at, delay](Bootstrap& b) -> absl::Status {
    bool armed = false;
    auto arm = [&](Phase p) {
      if (b.rank() != victim || p != phase) return;
      armed = true;
      std::thread([delay] {
        absl::SleepFor(delay);
        raise(SIGKILL);
      }).detach();
    };
    absl::Status s = RunPhases(b, collective_at, arm);
    if (b.rank() == victim) {
      // The victim dies whatever happened: now if its phase never came.
      if (!armed) raise(SIGKILL);
      absl::SleepFor(absl::Seconds(5));
    }
    return s;
  };
}

void RunKill(const std::string& name, Phase phase, absl::Duration max_delay) {
  Tally tally;
  RunLaunches(
      name, tally,
      [phase, max_delay](absl::BitGen& gen) {
        const int victim = absl::Uniform(gen, 0, kRanks);
        const absl::Duration delay = absl::Microseconds(absl::Uniform<int64_t>(
            gen, 0, absl::ToInt64Microseconds(max_delay) + 1));
        const int collective_at = absl::Uniform(gen, 0, kCollectives);
        return std::make_pair(victim,
                              KillBody(victim, phase, collective_at, delay));
      },
      ExpectOkOrPeerNamed);
  EXPECT_EQ(tally.failures, 0) << tally.text;
}

TEST(GlooChaos, SigkillDuringCreation) {
  RunKill("sigkill_during_creation", Phase::kCreation, absl::Milliseconds(60));
}

TEST(GlooChaos, SigkillDuringCollective) {
  RunKill("sigkill_during_collective", Phase::kCollective,
          absl::Microseconds(500));
}

TEST(GlooChaos, SigkillDuringTeardown) {
  RunKill("sigkill_during_teardown", Phase::kTeardown, absl::Milliseconds(2));
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
