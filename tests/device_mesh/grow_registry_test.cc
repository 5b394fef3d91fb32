// devmesh/tests/device_mesh/grow_registry_test.cc
// The store protocol of spares and Grow (device_mesh/spare_registry.h) over
// an in-memory store: decisions round-trip exactly, text that is not a
// decision is an Internal error (never a crash), the job's position follows
// Shrink and Grow decisions from the job's epoch pointer, registered spares
// are read once each, and retiring old epochs deletes each one's keys but
// "death" and "decision", each epoch once, the pointer only rising.
#include "device_mesh/spare_registry.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/error_info.h"
#include "device_mesh/failure_watch.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

TEST(GrowDecision, GrownRoundTrips) {
  GrowDecision d;
  d.kind = GrowDecision::Kind::kGrown;
  d.admitted = {2, 3};
  d.waiting = {7};
  d.root_index = 4;
  d.replica_dim = 1;
  d.mesh = std::string("bytes\n:with\0binary", 18);
  d.asks = {{0, "12:mesh dim 'dp'x=1/1;"}, {5, ""}};
  d.hosts = {"h0", "h0", "h2", "h2.example.org"};
  const std::string text = EncodeGrowDecision(d);
  EXPECT_EQ(text.substr(0, 51),
            "grown;admitted=2,3;waiting=7;root=4;dim=1\n18:bytes\n");
  EXPECT_EQ(text.substr(63, 30), "\n23:h0,h0,h2,h2.example.org\n0:");
  absl::StatusOr<GrowDecision> back = DecodeGrowDecision(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, GrowDecision::Kind::kGrown);
  EXPECT_EQ(back->admitted, d.admitted);
  EXPECT_EQ(back->waiting, d.waiting);
  EXPECT_EQ(back->root_index, 4);
  EXPECT_EQ(back->replica_dim, 1);
  EXPECT_EQ(back->mesh, d.mesh);
  EXPECT_EQ(back->asks, d.asks);
  EXPECT_EQ(back->hosts, d.hosts);
  // No host table: an empty block, read back empty.
  d.hosts.clear();
  back = DecodeGrowDecision(EncodeGrowDecision(d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->hosts.empty());
  EXPECT_EQ(back->asks, d.asks);
}

TEST(GrowDecision, UnchangedAndErrorRoundTrip) {
  GrowDecision u;
  u.kind = GrowDecision::Kind::kUnchanged;
  u.waiting = {2};
  EXPECT_EQ(EncodeGrowDecision(u), "unchanged;waiting=2");
  auto back = DecodeGrowDecision("unchanged;waiting=2");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, GrowDecision::Kind::kUnchanged);
  EXPECT_EQ(back->waiting, std::vector<int>{2});

  GrowDecision e;
  e.kind = GrowDecision::Kind::kError;
  e.error = WithDisagreement(absl::InvalidArgumentError("a; b"), 3);
  EXPECT_EQ(EncodeGrowDecision(e), "error=3;3;a; b");
  auto err = DecodeGrowDecision("error=3;3;a; b");
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->error, WithDisagreement(absl::InvalidArgumentError("a; b"), 3));
  auto plain = DecodeGrowDecision("error=4;-1;late");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->error, absl::DeadlineExceededError("late"));
  EXPECT_EQ(GetErrorInfo(plain->error).disagreeing, -1);
}

TEST(GrowDecision, TextThatIsNotADecisionIsInternal) {
  for (const std::string& bad :
       {std::string(""), std::string("grown;"), std::string("unchanged;"),
        std::string("unchanged;waiting=x"), std::string("error=0;-1;x"),
        std::string("error=99;-1;x"), std::string("error=3;x;y"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n99:short"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n1:x"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n1:x\n9:h0"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n1:x\n5:3:ab"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0\n1:x\nz:1:a"),
        std::string("grown;admitted=1;waiting=;root=0;dim=0;extra=1\n1:x"),
        std::string("\xff\xfe")}) {
    auto d = DecodeGrowDecision(bad);
    EXPECT_TRUE(absl::IsInternal(d.status())) << "'" << bad << "': "
                                              << d.status();
  }
}

TEST(JobPosition, FollowsShrinkAndGrowDecisions) {
  InMemoryStore store;
  auto at = FindJobPosition(store);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, (JobPosition{0, 0}));
  // Epoch 0: a Grow that admitted no one, then a Shrink.
  ASSERT_TRUE(store.Set(GrowKey(0, 0, "decision"), "unchanged;waiting=").ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{0, 1}));
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(0, "decision"),
                        "survivors=0,1;dead=2")
                  .ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{1, 0}));
  // Epoch 1: an error, then a Grow that admitted.
  ASSERT_TRUE(store.Set(GrowKey(1, 0, "decision"), "error=3;1;no").ok());
  ASSERT_TRUE(store.Set(GrowKey(1, 1, "decision"),
                        "grown;admitted=2;waiting=;root=0;dim=0\n0:")
                  .ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{2, 0}));
  // A failed Shrink decision does not move the job.
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(2, "decision"),
                        "error=4;late")
                  .ok());
  at = FindJobPosition(store);
  EXPECT_EQ(*at, (JobPosition{2, 0}));
}

TEST(RegisteredSpares, EachRankOnceSortedSkippingBadSlots) {
  InMemoryStore store;
  ASSERT_TRUE(RegisterSpare(store, 1, 3).ok());
  ASSERT_TRUE(RegisterSpare(store, 1, 2).ok());
  ASSERT_TRUE(RegisterSpare(store, 1, 3).ok());  // restarted, registered again
  ASSERT_TRUE(store.Add(SpareCountKey(1), 1).ok());  // counted, not written
  ASSERT_TRUE(store.Add(SpareCountKey(1), 1).ok());
  ASSERT_TRUE(store.Set(SpareSlotKey(1, 4), "not a rank").ok());
  auto spares = RegisteredSpares(store, 1);
  ASSERT_TRUE(spares.ok()) << spares.status();
  EXPECT_EQ(*spares, (std::vector<int>{2, 3}));
  auto none = RegisteredSpares(store, 2);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Every key of `epoch` that DeleteEpochKeys deletes, for a job of 4 ranks
// with spares 2 and 3 registered and 2 Grow attempts.
std::vector<std::string> EpochKeys(int64_t epoch) {
  std::vector<std::string> keys = {SpareCountKey(epoch), SpareSlotKey(epoch, 0),
                                   SpareSlotKey(epoch, 1)};
  for (int r = 0; r < 4; ++r) {
    keys.push_back(FailureWatch::EpochKey(epoch, absl::StrCat("arrive/", r)));
  }
  for (int n = 0; n < 2; ++n) {
    keys.push_back(GrowKey(epoch, n, "open"));
    keys.push_back(GrowKey(epoch, n, "decision"));
    for (int r : {0, 1}) {
      keys.push_back(GrowKey(epoch, n, absl::StrCat("arrive/", r)));
    }
    for (int r : {2, 3}) {
      keys.push_back(GrowKey(epoch, n, absl::StrCat("ready/", r)));
    }
  }
  return keys;
}

// Writes EpochKeys(epoch) and the two kept keys, as a job would.
void WriteEpoch(Store& store, int64_t epoch) {
  ASSERT_TRUE(RegisterSpare(store, epoch, 2).ok());
  ASSERT_TRUE(RegisterSpare(store, epoch, 3).ok());
  for (const std::string& k : EpochKeys(epoch)) {
    if (k == SpareCountKey(epoch) || k == SpareSlotKey(epoch, 0) ||
        k == SpareSlotKey(epoch, 1)) {
      continue;
    }
    ASSERT_TRUE(store.Set(k, "x").ok());
  }
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(epoch, "death"), "v").ok());
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(epoch, "decision"), "d").ok());
}

TEST(DeleteEpochKeys, DeletesAllButDeathAndDecision) {
  InMemoryStore store;
  WriteEpoch(store, 3);
  WriteEpoch(store, 4);
  ASSERT_TRUE(store.NumKeys().ok());
  EXPECT_EQ(*store.NumKeys(), 2 * (EpochKeys(3).size() + 2));
  ASSERT_TRUE(DeleteEpochKeys(store, 3, 4).ok());
  for (const std::string& k : EpochKeys(3)) {
    EXPECT_FALSE(*store.Check({k})) << k;
  }
  EXPECT_TRUE(*store.Check({FailureWatch::EpochKey(3, "death")}));
  EXPECT_TRUE(*store.Check({FailureWatch::EpochKey(3, "decision")}));
  // Epoch 4 untouched.
  EXPECT_EQ(*store.NumKeys(), 2 + EpochKeys(4).size() + 2);
  // Again: nothing left to delete, no error.
  EXPECT_TRUE(DeleteEpochKeys(store, 3, 4).ok());
}

// Group keys: a group recorded in epoch 0 and no later epoch is deleted; one
// kept through epochs 1 and 2 stays, also when epoch 1's records are gone
// already (a retirement of epoch 1, on another raise's thread, finished
// first: the pointer is then at 3, and epoch 2's records still name it).
TEST(DeleteEpochKeys, KeepsAGroupALaterEpochRecords) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set(JobEpochKey(), "3").ok());
  const std::string gone = absl::StrCat(GroupKeyPrefix("aaaa"), "/0/x");
  const std::string kept = absl::StrCat(GroupKeyPrefix("bbbb"), "/0/x");
  ASSERT_TRUE(store.Set(gone, "v").ok());
  ASSERT_TRUE(store.Set(kept, "v").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(0, 0), "aaaa,bbbb").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(0, 1), "bbbb").ok());
  // Epoch 1's records were deleted by its own retirement; epoch 2 keeps bbbb.
  ASSERT_TRUE(store.Set(GroupRecordKey(2, 1), "bbbb,cccc").ok());
  ASSERT_TRUE(DeleteEpochKeys(store, 0, 2).ok());
  EXPECT_FALSE(*store.Check({gone}));
  EXPECT_TRUE(*store.Check({kept}));
  EXPECT_FALSE(*store.Check({GroupRecordKey(0, 0)}));
  EXPECT_FALSE(*store.Check({GroupRecordKey(0, 1)}));
  EXPECT_TRUE(*store.Check({GroupRecordKey(2, 1)}));
}

// A user's Store written before Store::DeletePrefix existed: it overrides
// every other call (over an in-memory table) and not DeletePrefix.
class StoreWithoutDeletePrefix : public Store {
 public:
  absl::Duration default_timeout() const override {
    return table_.default_timeout();
  }
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return table_.Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    return table_.Get(key, timeout);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    return table_.Add(key, delta);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    return table_.CompareSet(key, expected, desired);
  }
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    return table_.Wait(keys, timeout);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    return table_.Check(keys);
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override {
    return table_.DeleteKey(key);
  }
  absl::StatusOr<int64_t> NumKeys() override { return table_.NumKeys(); }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override {
    return table_.MultiGet(keys, timeout);
  }
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    return table_.MultiSet(keys, values);
  }

 private:
  InMemoryStore table_;
};

TEST(StoreDefault, DeletePrefixIsUnimplementedAndDeletesNothing) {
  StoreWithoutDeletePrefix store;
  ASSERT_TRUE(store.Set("g/1/a", "v").ok());
  absl::StatusOr<int64_t> n = store.DeletePrefix("g/");
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(n.status().message(),
            "this Store subclass does not implement DeletePrefix (asked to "
            "delete the keys under 'g/'): nothing was deleted; override "
            "Store::DeletePrefix to delete them");
  EXPECT_EQ(*store.NumKeys(), 1);
}

// Retirement over that store: every key of the retired epochs but "death"
// and "decision" is deleted as over devmesh's stores; the groups' keys (a
// group no later epoch records, which DeletePrefix would delete) are kept.
TEST(DeleteEpochKeys, AStoreWithoutDeletePrefixKeepsTheGroupsKeys) {
  StoreWithoutDeletePrefix store;
  // At 3: epoch 1, without records, was retired, so epoch 0's groups are
  // free to delete.
  ASSERT_TRUE(store.Set(JobEpochKey(), "3").ok());
  WriteEpoch(store, 0);
  WriteEpoch(store, 1);
  const std::string gone = absl::StrCat(GroupKeyPrefix("aaaa"), "/0/x");
  const std::string also = absl::StrCat(GroupKeyPrefix("cccc"), "/1/y");
  ASSERT_TRUE(store.Set(gone, "v").ok());
  ASSERT_TRUE(store.Set(also, "v").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(0, 0), "aaaa,cccc").ok());
  ASSERT_TRUE(DeleteEpochKeys(store, 0, 4).ok());
  for (const std::string& k : EpochKeys(0)) {
    EXPECT_FALSE(*store.Check({k})) << k;
  }
  EXPECT_FALSE(*store.Check({GroupRecordKey(0, 0)}));
  EXPECT_TRUE(*store.Check({gone}));
  EXPECT_TRUE(*store.Check({also}));
  // Left: the pointer, epoch 0's death and decision, both group keys, and
  // epoch 1 whole.
  EXPECT_EQ(*store.NumKeys(), 1 + 2 + 2 + EpochKeys(1).size() + 2);
}

TEST(RetireEpochs, AStoreWithoutDeletePrefixRetiresAllButTheGroups) {
  auto store = std::make_shared<StoreWithoutDeletePrefix>();
  for (int64_t x = 0; x < 4; ++x) WriteEpoch(*store, x);
  const std::string group = absl::StrCat(GroupKeyPrefix("aaaa"), "/0/x");
  ASSERT_TRUE(store->Set(group, "v").ok());
  ASSERT_TRUE(store->Set(GroupRecordKey(1, 2), "aaaa").ok());
  // Every member of epoch 2 recorded (no group): aaaa is free.
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(store->Set(GroupRecordKey(2, r), "").ok());
  }
  RetireEpochs(store, 3, 4);  // retires 0 and 1
  EXPECT_EQ(*ReadJobEpoch(*store), 3);
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (*store->Check({SpareCountKey(1)}) && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (int64_t x = 0; x < 4; ++x) {
    for (const std::string& k : EpochKeys(x)) {
      EXPECT_EQ(*store->Check({k}), x >= 2) << k;
    }
  }
  EXPECT_FALSE(*store->Check({GroupRecordKey(1, 2)}));
  EXPECT_TRUE(*store->Check({group}));
}

// Records are best effort. Epoch 1 records groups aaaa (ranks 0, 1) and
// bbbb (rank 1); both ranks arrived in epoch 2's first Grow attempt, but
// rank 1's record of epoch 2 is missing (its Set failed): bbbb may still be
// held, so no group is deleted. Epoch 1's records go all the same.
TEST(DeleteEpochKeys, AMissingRecordOfAnArrivedMemberKeepsEveryGroup) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set(JobEpochKey(), "3").ok());
  const std::string a = absl::StrCat(GroupKeyPrefix("aaaa"), "/0/x");
  const std::string b = absl::StrCat(GroupKeyPrefix("bbbb"), "/0/x");
  const std::string c = absl::StrCat(GroupKeyPrefix("cccc"), "/0/x");
  for (const std::string& k : {a, b, c}) ASSERT_TRUE(store.Set(k, "v").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(1, 0), "aaaa,cccc").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(1, 1), "aaaa,bbbb").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(2, 0), "aaaa").ok());
  ASSERT_TRUE(store.Set(GrowKey(2, 0, "arrive/0"), "p").ok());
  ASSERT_TRUE(store.Set(GrowKey(2, 0, "arrive/1"), "p").ok());
  ASSERT_TRUE(DeleteEpochKeys(store, 1, 2).ok());
  EXPECT_TRUE(*store.Check({a}));
  EXPECT_TRUE(*store.Check({b}));
  EXPECT_TRUE(*store.Check({c}));  // free, but kept with the others
  EXPECT_FALSE(*store.Check({GroupRecordKey(1, 0)}));
  EXPECT_FALSE(*store.Check({GroupRecordKey(1, 1)}));
}

// Rank 1 died in epoch 1 (no arrival in epoch 2, so no record expected):
// its groups that no one records in epoch 2 are deleted.
TEST(DeleteEpochKeys, ADeadMembersGroupsAreDeleted) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set(JobEpochKey(), "3").ok());
  const std::string a = absl::StrCat(GroupKeyPrefix("aaaa"), "/0/x");
  const std::string b = absl::StrCat(GroupKeyPrefix("bbbb"), "/0/x");
  for (const std::string& k : {a, b}) ASSERT_TRUE(store.Set(k, "v").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(1, 0), "aaaa").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(1, 1), "aaaa,bbbb").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(2, 0), "aaaa").ok());
  ASSERT_TRUE(
      store.Set(FailureWatch::EpochKey(2, "arrive/0"), "p").ok());
  ASSERT_TRUE(DeleteEpochKeys(store, 1, 2).ok());
  EXPECT_TRUE(*store.Check({a}));
  EXPECT_FALSE(*store.Check({b}));
}

// Epoch 2 has no record at all and is not retired (the pointer is below 4):
// none of its records could be written, so every group is kept.
TEST(DeleteEpochKeys, NoRecordOfTheNextEpochKeepsEveryGroup) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set(JobEpochKey(), "3").ok());
  const std::string a = absl::StrCat(GroupKeyPrefix("aaaa"), "/0/x");
  ASSERT_TRUE(store.Set(a, "v").ok());
  ASSERT_TRUE(store.Set(GroupRecordKey(1, 0), "aaaa").ok());
  ASSERT_TRUE(DeleteEpochKeys(store, 1, 2).ok());
  EXPECT_TRUE(*store.Check({a}));
  EXPECT_FALSE(*store.Check({GroupRecordKey(1, 0)}));
}

TEST(RaiseJobEpoch, RetiresEachEpochOnceAndOnlyRises) {
  InMemoryStore store;
  auto range = [&](int64_t epoch) {
    auto r = RaiseJobEpoch(store, epoch);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::make_pair(r->first, r->last)
                  : std::make_pair(int64_t{-9}, int64_t{-9});
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(range(1), (P{0, -1}));  // nothing to retire yet
  EXPECT_EQ(*ReadJobEpoch(store), 1);
  EXPECT_EQ(range(2), (P{0, 0}));
  EXPECT_EQ(range(2), (P{0, -1}));  // raised already: none
  EXPECT_EQ(range(5), (P{1, 3}));   // a Shrink of 3 rounds: 1..3 at once
  EXPECT_EQ(range(4), (P{0, -1}));  // late: never lowers it
  EXPECT_EQ(*ReadJobEpoch(store), 5);
  EXPECT_EQ(range(6), (P{4, 4}));
  ASSERT_TRUE(store.Set(JobEpochKey(), "garbage").ok());
  EXPECT_TRUE(absl::IsInternal(RaiseJobEpoch(store, 7).status()));
}

TEST(RetireEpochs, DeletesTheRetiredEpochsOnItsThread) {
  auto store = std::make_shared<InMemoryStore>();
  for (int64_t x = 0; x < 5; ++x) WriteEpoch(*store, x);
  RetireEpochs(store, 4, 4);  // retires 0, 1, 2
  EXPECT_EQ(*ReadJobEpoch(*store), 4);
  auto left = [&](int64_t x) {
    int n = 0;
    for (const std::string& k : EpochKeys(x)) n += *store->Check({k}) ? 1 : 0;
    return n;
  };
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (left(2) > 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (int64_t x = 0; x < 5; ++x) {
    EXPECT_EQ(left(x), x <= 2 ? 0 : static_cast<int>(EpochKeys(x).size()))
        << "epoch " << x;
    EXPECT_TRUE(*store->Check({FailureWatch::EpochKey(x, "death")}));
    EXPECT_TRUE(*store->Check({FailureWatch::EpochKey(x, "decision")}));
  }
}

TEST(JobPosition, StartsAtThePointer) {
  InMemoryStore store;
  // Epochs 0..2 retired (their Grow decisions gone), the job at 4: a
  // Shrink in 3 (kept), a Grow in 4 that admitted no one.
  ASSERT_TRUE(store.Set(FailureWatch::EpochKey(3, "decision"),
                        "survivors=0,1;dead=2")
                  .ok());
  ASSERT_TRUE(store.Set(GrowKey(4, 0, "decision"), "unchanged;waiting=").ok());
  ASSERT_TRUE(RaiseJobEpoch(store, 3).ok());
  auto at = FindJobPosition(store);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(*at, (JobPosition{4, 1}));
  // The pointer past every decision written: the job is where it says.
  ASSERT_TRUE(RaiseJobEpoch(store, 7).ok());
  at = FindJobPosition(store);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(*at, (JobPosition{7, 0}));
}

// An in-memory store on which the job moves on to epoch 7 (pointer raised,
// epoch 4's Grow decisions deleted) at the scan's first look at `key`:
// after the look when `after_look`, else just before it.
class JobMovesOn : public InMemoryStore {
 public:
  JobMovesOn(std::string key, bool after_look)
      : key_(std::move(key)), after_look_(after_look) {}
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    if (moved_ || keys.size() != 1 || keys[0] != key_) {
      return InMemoryStore::Check(keys);
    }
    moved_ = true;
    if (!after_look_) MoveOn();
    auto there = InMemoryStore::Check(keys);
    if (after_look_) MoveOn();
    return there;
  }

 private:
  void MoveOn() {
    ASSERT_TRUE(RaiseJobEpoch(*this, 7).ok());
    ASSERT_TRUE(DeleteEpochKeys(*this, 4, 4).ok());
  }
  const std::string key_;
  const bool after_look_;
  bool moved_ = false;
};

TEST(JobPosition, AScanOfARetiredEpochStartsAgainFromThePointer) {
  for (bool after_look : {false, true}) {
    SCOPED_TRACE(after_look ? "deleted between Check and Get"
                            : "deleted before Check");
    // The job at (4, 1) when the scan starts; at (7, 0) when it ends.
    JobMovesOn store(GrowKey(4, 0, "decision"), after_look);
    ASSERT_TRUE(
        store.Set(GrowKey(4, 0, "decision"), "unchanged;waiting=").ok());
    ASSERT_TRUE(RaiseJobEpoch(store, 4).ok());
    const absl::Time start = absl::Now();
    auto at = FindJobPosition(store);
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_EQ(*at, (JobPosition{7, 0}));
    // A read of a key deleted under it waits 2 s, not the store's timeout.
    EXPECT_LT(absl::Now() - start, absl::Seconds(after_look ? 10 : 1));
  }
}

}  // namespace
}  // namespace device_mesh_internal
}  // namespace devmesh
