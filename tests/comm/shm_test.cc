// devmesh/tests/comm/shm_test.cc
// The shared-memory backend in real processes: a 4-rank world split into the
// dp and tp groups of a 2x2 mesh (both shm), exact results for every dtype x
// op at sizes that cross the one-shot / two-step switch and the slot size
// (1, 7, 1023, 2^18 + 3 and 3 MiB + 5 elements), in place and out of place;
// every other collective at odd multi-round sizes; dp and tp used at once
// from two threads; nothing left in /dev/shm; bad arguments.
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/dtype.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"
#include "store/prefix_store.h"
#include "tests/comm/fork_ranks.h"
#include "tests/comm/shm_segments.h"
#include "tests/comm/typed_values.h"

namespace devmesh {
namespace {

using testing::CheckEqual;
using testing::Decode;
using testing::Encode;
using testing::ForkRanks;
using testing::InputValue;
using testing::ReduceValues;

constexpr int kRanks = 4;

struct Groups {
  std::unique_ptr<Communicator> world, dp, tp;
};

// The world ("shm"), then the 2x2 mesh's groups: tp = {0,1}, {2,3} (color
// rank / 2), dp = {0,2}, {1,3} (color rank % 2). Both must be shm.
absl::StatusOr<Groups> MakeGroups(int rank, int size,
                                  std::shared_ptr<Store> store) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  auto world = CreateCommunicator("shm", std::move(store), rank, size, options);
  if (!world.ok()) return world.status();
  auto tp = (*world)->Split(rank / 2, rank);
  if (!tp.ok()) return tp.status();
  auto dp = (*world)->Split(rank % 2, rank);
  if (!dp.ok()) return dp.status();
  // Every rank is a child of the test's process, of one user: the set-up's
  // process_vm_readv probe passes unless the test turns it off.
  const char* off = std::getenv("DEVMESH_SHM_SINGLE_COPY");
  const bool single_copy = off == nullptr || std::string(off) != "0";
  for (Communicator* c : {world->get(), tp->get(), dp->get()}) {
    if (c->backend() != "shm") {
      return absl::InternalError(
          absl::StrCat("a group is ", c->backend(), ", not shm"));
    }
    const auto* shm = dynamic_cast<const ShmCommunicator*>(c);
    if (shm == nullptr || shm->single_copy() != single_copy) {
      return absl::InternalError(absl::StrCat(
          "a group's single_copy() is not ", single_copy));
    }
  }
  return Groups{*std::move(world), *std::move(dp), *std::move(tp)};
}

// Group rank r of `group` is global rank global_ranks()[r]; inputs are made
// from the global rank so that the expected values need no exchange.
// Out of place, then in place.
absl::Status CheckAllReduce(Communicator& group, DataType dtype, ReduceOp op,
                            size_t count) {
  const std::vector<int>& members = group.global_ranks();
  const int me = members[group.rank()];
  std::vector<double> in(count), expected(count);
  std::vector<double> all(members.size());
  for (size_t i = 0; i < count; ++i) {
    in[i] = InputValue(op, dtype, me, i);
    for (size_t r = 0; r < members.size(); ++r) {
      all[r] = InputValue(op, dtype, members[r], i);
    }
    expected[i] = ReduceValues(op, dtype, all);
  }
  const std::vector<char> original = Encode(dtype, in);
  for (bool in_place : {false, true}) {
    std::vector<char> send = original;
    std::vector<char> recv(send.size(), 0);
    char* out = in_place ? send.data() : recv.data();
    DEVMESH_RETURN_IF_ERROR(group.AllReduce(send.data(), out, count, dtype, op));
    const std::string what =
        absl::StrCat("allreduce ", DataTypeName(dtype), " ", ReduceOpName(op),
                     " x ", count, in_place ? " in place" : " out of place",
                     " on ", group.size(), " ranks");
    DEVMESH_RETURN_IF_ERROR(CheckEqual(what, expected, Decode(dtype, out, count)));
    if (!in_place && send != original) {
      return absl::InternalError(absl::StrCat(what, ": send buffer changed"));
    }
  }
  return absl::OkStatus();
}

TEST(ShmTest, AllReduceEveryDtypeOpAndSizeOnDpAndTp) {
  const std::set<std::string> segments_before = testing::AllSegments();
  absl::Status status = ForkRanks(
      kRanks,
      [](int rank, int size, std::shared_ptr<Store> store) {
        auto groups = MakeGroups(rank, size, store);
        if (!groups.ok()) return groups.status();
        // Every segment is unlinked once mapped: none is visible while the
        // groups are alive (after a barrier: until every rank is past its
        // groups' set-up, another group's segment may still be in transit).
        int64_t pid = getpid();
        std::vector<int64_t> pids(size);
        DEVMESH_RETURN_IF_ERROR(groups->world->AllGather(&pid, pids.data(), 1,
                                                   DataType::kInt64));
        const std::set<std::string> left =
            testing::SegmentsOf({pids.begin(), pids.end()});
        if (!left.empty()) {
          return absl::InternalError(absl::StrCat(
              "segment ", *left.begin(), " is left in /dev/shm"));
        }
        const size_t kSizes[] = {1, 7, 1023, (size_t{1} << 18) + 3,
                                 (size_t{3} << 20) + 5};
        for (size_t count : kSizes) {
          for (DataType dtype : kAllDataTypes) {
            for (ReduceOp op : kAllReduceOps) {
              for (Communicator* g : {groups->dp.get(), groups->tp.get()}) {
                DEVMESH_RETURN_IF_ERROR(CheckAllReduce(*g, dtype, op, count));
              }
            }
          }
        }
        // The world (4 members: parts of unequal length, reduce chains of
        // three steps) at the two-step sizes.
        for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16,
                               DataType::kInt64}) {
          for (ReduceOp op : kAllReduceOps) {
            DEVMESH_RETURN_IF_ERROR(CheckAllReduce(*groups->world, dtype, op,
                                             (size_t{1} << 18) + 3));
          }
        }
        return absl::OkStatus();
      },
      absl::Seconds(600));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(testing::NewLeakedSegments(segments_before),
            std::set<std::string>());
}

// Every other collective at an odd size of several rounds, exact.
TEST(ShmTest, OtherCollectivesAtMultiRoundSizes) {
  absl::Status status = ForkRanks(kRanks, [](int rank, int size,
                                             std::shared_ptr<Store> store) {
    auto groups = MakeGroups(rank, size, store);
    if (!groups.ok()) return groups.status();
    for (Communicator* g :
         {groups->world.get(), groups->dp.get(), groups->tp.get()}) {
      const int n = g->size();
      const int me = g->rank();
      // 2^18 + 3 int32: one block is just over 1 MiB, several 256 KiB slots.
      const size_t count = (size_t{1} << 18) + 3;
      auto value = [](int r, size_t i) {
        return static_cast<int32_t>(r * 1000003 + static_cast<int64_t>(i));
      };
      // AllGather, out of place and in place.
      for (bool in_place : {false, true}) {
        std::vector<int32_t> recv(count * n, -1);
        std::vector<int32_t> send(count);
        for (size_t i = 0; i < count; ++i) send[i] = value(me, i);
        const int32_t* src = send.data();
        if (in_place) {
          std::memcpy(recv.data() + me * count, send.data(), count * 4);
          src = recv.data() + me * count;
        }
        DEVMESH_RETURN_IF_ERROR(
            g->AllGather(src, recv.data(), count, DataType::kInt32));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            if (recv[r * count + i] != value(r, i)) {
              return absl::InternalError(absl::StrCat(
                  "allgather block ", r, " element ", i, ": ",
                  recv[r * count + i], " != ", value(r, i)));
            }
          }
        }
      }
      // ReduceScatter (sum), out of place and in place.
      for (bool in_place : {false, true}) {
        std::vector<int32_t> send(count * n);
        for (size_t i = 0; i < send.size(); ++i) send[i] = value(me, i);
        std::vector<int32_t> recv(count, -1);
        int32_t* out = in_place ? send.data() + me * count : recv.data();
        DEVMESH_RETURN_IF_ERROR(g->ReduceScatter(send.data(), out, count,
                                           DataType::kInt32, ReduceOp::kSum));
        for (size_t i = 0; i < count; ++i) {
          int64_t want = 0;
          for (int r = 0; r < n; ++r) want += value(r, me * count + i);
          if (out[i] != static_cast<int32_t>(want)) {
            return absl::InternalError(absl::StrCat(
                "reducescatter element ", i, ": ", out[i], " != ", want));
          }
        }
      }
      // Broadcast from every root.
      for (int root = 0; root < n; ++root) {
        std::vector<int32_t> buf(count, -1);
        if (me == root) {
          for (size_t i = 0; i < count; ++i) buf[i] = value(root, i);
        }
        DEVMESH_RETURN_IF_ERROR(g->Broadcast(buf.data(), buf.data(), count,
                                       DataType::kInt32, root));
        for (size_t i = 0; i < count; ++i) {
          if (buf[i] != value(root, i)) {
            return absl::InternalError(absl::StrCat(
                "broadcast root ", root, " element ", i, ": ", buf[i]));
          }
        }
      }
      // AllToAll, out of place and in place: block j of rank r carries
      // value(r * n + j, i).
      for (bool in_place : {false, true}) {
        std::vector<int32_t> send(count * n);
        for (int j = 0; j < n; ++j) {
          for (size_t i = 0; i < count; ++i) {
            send[j * count + i] = value(me * n + j, i);
          }
        }
        std::vector<int32_t> recv(count * n, -1);
        int32_t* out = in_place ? send.data() : recv.data();
        DEVMESH_RETURN_IF_ERROR(
            g->AllToAll(send.data(), out, count, DataType::kInt32));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            if (out[r * count + i] != value(r * n + me, i)) {
              return absl::InternalError(absl::StrCat(
                  "alltoall block ", r, " element ", i, ": ",
                  out[r * count + i], " != ", value(r * n + me, i)));
            }
          }
        }
      }
      DEVMESH_RETURN_IF_ERROR(g->Barrier());
    }
    return absl::OkStatus();
  }, absl::Seconds(300));
  EXPECT_TRUE(status.ok()) << status;
}

// dp and tp of one rank used at the same time from two threads (distinct
// communicators from distinct threads: the Communicator contract).
TEST(ShmTest, DpAndTpConcurrentlyFromTwoThreads) {
  absl::Status status = ForkRanks(kRanks, [](int rank, int size,
                                             std::shared_ptr<Store> store) {
    auto groups = MakeGroups(rank, size, store);
    if (!groups.ok()) return groups.status();
    absl::Status results[2];
    auto loop = [&](int which) {
      Communicator* g = which == 0 ? groups->dp.get() : groups->tp.get();
      const std::vector<int>& members = g->global_ranks();
      for (int it = 0; it < 200; ++it) {
        // Alternate a one-shot size and a two-step, multi-round size.
        const size_t count = it % 2 ? 300000 : 37;
        std::vector<int64_t> buf(count);
        for (size_t i = 0; i < count; ++i) {
          buf[i] = rank * 7 + static_cast<int64_t>(i) + it;
        }
        absl::Status s = g->AllReduce(buf.data(), buf.data(), count,
                                      DataType::kInt64, ReduceOp::kSum);
        if (!s.ok()) {
          results[which] = s;
          return;
        }
        for (size_t i = 0; i < count; ++i) {
          int64_t want = 0;
          for (int r : members) want += r * 7 + static_cast<int64_t>(i) + it;
          if (buf[i] != want) {
            results[which] = absl::InternalError(absl::StrCat(
                which == 0 ? "dp" : "tp", " iteration ", it, " element ", i,
                ": ", buf[i], " != ", want));
            return;
          }
        }
      }
    };
    std::thread dp_thread(loop, 0);
    loop(1);
    dp_thread.join();
    DEVMESH_RETURN_IF_ERROR(results[0]);
    return results[1];
  }, absl::Seconds(300));
  EXPECT_TRUE(status.ok()) << status;
}

// Drops CAP_SYS_PTRACE from this process's effective set (root's
// process_vm_readv would otherwise pass every check).
absl::Status DropPtraceCapability() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) {
    return absl::InternalError("capget failed");
  }
  data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
  if (syscall(SYS_capset, &header, data) != 0) {
    return absl::InternalError("capset failed");
  }
  return absl::OkStatus();
}

// A member whose buffer its peers can no longer read (it became
// non-dumpable after the set-up's probe, and they may not ptrace it), while
// it still reads theirs: the single-copy all-reduce fails on every member,
// none returns OK with that member's part left incomplete.
TEST(ShmTest, SingleCopyReadFailureFailsEveryMember) {
  // The case's 2 MiB all-reduce must take the single-copy path.
  const char* min = std::getenv("DEVMESH_SHM_SINGLE_COPY_MIN");
  size_t min_bytes = 0;
  if (min == nullptr || !absl::SimpleAtoi(min, &min_bytes) ||
      min_bytes > (size_t{2} << 20)) {
    GTEST_SKIP() << "the single-copy all-reduce is off unless "
                    "DEVMESH_SHM_SINGLE_COPY_MIN is at most 2 MiB; "
                    "shm_single_copy_test runs this case with it";
  }
  absl::Status status = ForkRanks(
      kRanks,
      [](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        auto groups = MakeGroups(rank, size, store);
        if (!groups.ok()) return groups.status();
        const auto* shm = dynamic_cast<const ShmCommunicator*>(
            groups->world.get());
        if (shm == nullptr || !shm->single_copy()) return absl::OkStatus();
        if (rank == 1) {
          if (prctl(PR_SET_DUMPABLE, 0) != 0) {
            return absl::InternalError("prctl failed");
          }
        } else {
          DEVMESH_RETURN_IF_ERROR(DropPtraceCapability());
        }
        DEVMESH_RETURN_IF_ERROR(groups->world->Barrier());
        std::vector<float> buf(size_t{1} << 19, 1.0f);  // 2 MiB
        absl::Status s = groups->world->AllReduce(
            buf.data(), buf.data(), buf.size(), DataType::kFloat32,
            ReduceOp::kSum);
        if (s.ok()) {
          return absl::InternalError(
              "the all-reduce returned OK though a member's buffer could "
              "not be read");
        }
        // Rank 1 read everything; it learns that a peer could not read it.
        const std::string want =
            rank == 1 ? "could not read the buffer of global rank 1"
                      : "reading the buffer of global rank 1";
        if (s.code() != absl::StatusCode::kUnavailable ||
            !absl::StrContains(s.message(), want)) {
          return absl::InternalError(absl::StrCat(
              "want Unavailable with '", want, "', got ", s.ToString()));
        }
        return absl::OkStatus();
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ShmTest, BadArguments) {
  EXPECT_EQ(ShareMemory(nullptr, ShmOptions()).status().message(),
            "shm: ShareMemory needs a group, got null");
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    CommOptions options;
    options.timeout = absl::Seconds(30);
    auto world = CreateCommunicator("shm", store, rank, size, options);
    if (!world.ok()) return world.status();
    float x = 1;
    absl::Status s = (*world)->AllReduce(nullptr, &x, 4, DataType::kFloat32,
                                         ReduceOp::kSum);
    if (s.message() != "shm allreduce: send buffer is null with count 4") {
      return absl::InternalError(s.ToString());
    }
    s = (*world)->Broadcast(&x, &x, 1, DataType::kFloat32, 2);
    if (s.message() != "shm broadcast: root 2 is outside [0, 2)") {
      return absl::InternalError(s.ToString());
    }
    s = (*world)->AllReduce(&x, &x, 1, static_cast<DataType>(99),
                            ReduceOp::kSum);
    if (s.message() != "shm allreduce: invalid dtype value 99") {
      return absl::InternalError(s.ToString());
    }
    s = (*world)->AllReduce(&x, &x, 1, DataType::kFloat32,
                            static_cast<ReduceOp>(7));
    if (s.message() != "shm allreduce: invalid ReduceOp value 7") {
      return absl::InternalError(s.ToString());
    }
    // Still usable after rejected calls (they touched no step).
    DEVMESH_RETURN_IF_ERROR((*world)->AllReduce(&x, &x, 1, DataType::kFloat32,
                                          ReduceOp::kSum));
    if (x != 2) return absl::InternalError(absl::StrCat("sum ", x));
    ShmOptions bad;
    bad.timeout = absl::ZeroDuration();
    auto ucx = CreateCommunicator("ucx", std::make_shared<PrefixStore>(
                                             store, "again/"),
                                  rank, size, options);
    if (!ucx.ok()) return ucx.status();
    auto shared = ShareMemory(std::shared_ptr<Communicator>(*std::move(ucx)),
                              bad);
    if (shared.status().message() != "shm: timeout (0) must be positive") {
      return absl::InternalError(shared.status().ToString());
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
