// devmesh/tests/comm/cpu_collectives_test.cc
// Every collective of the CPU backends (Gloo, shared memory: "shm", and UCX) x
// every dtype (x every op), in real processes at 2, 4 and 8 ranks, against
// exact expected values; out-of-place and in-place.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/dtype.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"
#include "tests/comm/typed_values.h"

namespace devmesh {
namespace {

using testing::CheckEqual;
using testing::Decode;
using testing::Encode;
using testing::ForkRanks;
using testing::InputValue;
using testing::ReduceValues;

#define RETURN_IF_ERROR_T(expr)              \
  do {                                       \
    absl::Status _s = (expr);                \
    if (!_s.ok()) return _s;                 \
  } while (0)

constexpr size_t kCounts[] = {1, 13, 1031};

absl::StatusOr<std::unique_ptr<Communicator>> World(
    const std::string& backend, int rank, int size,
    std::shared_ptr<Store> store) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  auto comm = CreateCommunicator(backend, std::move(store), rank, size,
                                 options);
  if (comm.ok() && (*comm)->backend() != backend) {
    return absl::InternalError(absl::StrCat("asked for ", backend, ", got ",
                                            (*comm)->backend()));
  }
  return comm;
}

std::string What(absl::string_view op, DataType dtype, size_t count,
                 bool in_place, absl::string_view extra = "") {
  return absl::StrCat(op, " ", DataTypeName(dtype), " ", extra, " count ",
                      count, in_place ? " in-place" : " out-of-place");
}

// (backend, ranks).
class CpuCollectivesTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  static std::string Backend() { return std::get<0>(GetParam()); }
  static int Nproc() { return std::get<1>(GetParam()); }
};

TEST_P(CpuCollectivesTest, AllReduceEveryDtypeAndOp) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (size_t count : kCounts) {
          for (bool in_place : {false, true}) {
            std::vector<double> in(count), expected(count);
            for (size_t i = 0; i < count; ++i) {
              in[i] = InputValue(op, dtype, rank, i);
              std::vector<double> all(size);
              for (int r = 0; r < size; ++r) all[r] = InputValue(op, dtype, r, i);
              expected[i] = ReduceValues(op, dtype, all);
            }
            std::vector<char> send = Encode(dtype, in);
            std::vector<char> recv(send.size(), 0);
            char* out = in_place ? send.data() : recv.data();
            RETURN_IF_ERROR_T((*comm)->AllReduce(send.data(), out, count,
                                                 dtype, op));
            RETURN_IF_ERROR_T(CheckEqual(
                What("allreduce", dtype, count, in_place, ReduceOpName(op)),
                expected, Decode(dtype, out, count)));
            // Out of place, the send buffer is only read (Gloo gets it as
            // its input).
            if (!in_place && send != Encode(dtype, in)) {
              return absl::InternalError(absl::StrCat(
                  What("allreduce", dtype, count, false, ReduceOpName(op)),
                  ": send buffer changed"));
            }
          }
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// send and recv overlapping but not identical: recv gets the reduction of
// every rank's send as it was before the call (moved, then reduced in place).
// Both of Gloo's all-reduce algorithms (comm/gloo/gloo_communicator.h):
// bcube up to kGlooBcubeMaxBytes, the ring one element beyond; int32 sums
// (exact), in place and out of place, also on groups whose size is not a
// power of two (bcube then factorizes the size, or exchanges directly).
// Shared memory runs the same sizes.
class GlooAlgorithmSwitchTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(GlooAlgorithmSwitchTest, AllReduceAroundTheSwitch) {
  const std::string backend = std::get<0>(GetParam());
  absl::Status status = ForkRanks(std::get<1>(GetParam()), [backend](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    const size_t at_switch = kGlooBcubeMaxBytes / sizeof(int32_t);
    for (size_t count : {size_t{1}, size_t{7}, at_switch, at_switch + 1}) {
      for (bool in_place : {false, true}) {
        std::vector<int32_t> send(count), recv(count, -1);
        for (size_t i = 0; i < count; ++i) {
          send[i] = (rank + 1) * static_cast<int32_t>(i % 1000 + 1);
        }
        int32_t* out = in_place ? send.data() : recv.data();
        RETURN_IF_ERROR_T((*comm)->AllReduce(send.data(), out, count,
                                             DataType::kInt32, ReduceOp::kSum));
        const int32_t ranks_sum = size * (size + 1) / 2;
        for (size_t i = 0; i < count; ++i) {
          const int32_t want = ranks_sum * static_cast<int32_t>(i % 1000 + 1);
          if (out[i] != want) {
            return absl::InternalError(absl::StrCat(
                What("allreduce", DataType::kInt32, count, in_place), ": [",
                i, "] = ", out[i], ", want ", want));
          }
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, AllReduceOverlappingBuffers) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    // send = buf[0, 6), recv = buf[2, 8); send[i] = (rank + 1) * (i + 1).
    std::vector<int32_t> buf(8, -7);
    for (int i = 0; i < 6; ++i) buf[i] = (rank + 1) * (i + 1);
    RETURN_IF_ERROR_T((*comm)->AllReduce(buf.data(), buf.data() + 2, 6,
                                         DataType::kInt32, ReduceOp::kSum));
    const int32_t ranks_sum = size * (size + 1) / 2;
    for (int i = 0; i < 6; ++i) {
      if (buf[2 + i] != ranks_sum * (i + 1)) {
        return absl::InternalError(absl::StrCat(
            "overlapping allreduce: recv[", i, "] = ", buf[2 + i],
            ", want ", ranks_sum * (i + 1)));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, ReduceScatterEveryDtypeAndOp) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (size_t count : kCounts) {
          for (bool in_place : {false, true}) {
            const size_t total = count * size;
            std::vector<double> in(total), expected(count);
            for (size_t i = 0; i < total; ++i) {
              in[i] = InputValue(op, dtype, rank, i);
            }
            for (size_t i = 0; i < count; ++i) {
              const size_t at = rank * count + i;
              std::vector<double> all(size);
              for (int r = 0; r < size; ++r) all[r] = InputValue(op, dtype, r, at);
              expected[i] = ReduceValues(op, dtype, all);
            }
            std::vector<char> send = Encode(dtype, in);
            std::vector<char> recv(count * DataTypeSize(dtype), 0);
            char* out = in_place
                            ? send.data() + rank * count * DataTypeSize(dtype)
                            : recv.data();
            RETURN_IF_ERROR_T((*comm)->ReduceScatter(send.data(), out, count,
                                                     dtype, op));
            RETURN_IF_ERROR_T(CheckEqual(
                What("reduce_scatter", dtype, count, in_place,
                     ReduceOpName(op)),
                expected, Decode(dtype, out, count)));
          }
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, AllGatherEveryDtype) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (DataType dtype : kAllDataTypes) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          std::vector<double> mine(count), expected(count * size);
          for (size_t i = 0; i < count; ++i) {
            mine[i] = InputValue(ReduceOp::kSum, dtype, rank, i);
          }
          for (int r = 0; r < size; ++r) {
            for (size_t i = 0; i < count; ++i) {
              expected[r * count + i] = InputValue(ReduceOp::kSum, dtype, r, i);
            }
          }
          const size_t bytes = count * DataTypeSize(dtype);
          std::vector<char> send = Encode(dtype, mine);
          std::vector<char> recv(bytes * size, 0);
          const char* in = send.data();
          if (in_place) {
            std::memcpy(recv.data() + rank * bytes, send.data(), bytes);
            in = recv.data() + rank * bytes;
          }
          RETURN_IF_ERROR_T((*comm)->AllGather(in, recv.data(), count, dtype));
          RETURN_IF_ERROR_T(CheckEqual(What("allgather", dtype, count, in_place),
                                       expected,
                                       Decode(dtype, recv.data(), count * size)));
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, BroadcastEveryDtypeAndRoot) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (DataType dtype : kAllDataTypes) {
      for (int root = 0; root < size; ++root) {
        for (bool in_place : {false, true}) {
          const size_t count = 13;
          std::vector<double> expected(count);
          for (size_t i = 0; i < count; ++i) {
            expected[i] = InputValue(ReduceOp::kSum, dtype, root, i);
          }
          std::vector<char> send =
              rank == root ? Encode(dtype, expected)
                           : std::vector<char>(count * DataTypeSize(dtype), 0);
          std::vector<char> recv(send.size(), 0);
          char* out = in_place ? send.data() : recv.data();
          RETURN_IF_ERROR_T(
              (*comm)->Broadcast(send.data(), out, count, dtype, root));
          RETURN_IF_ERROR_T(CheckEqual(
              What("broadcast", dtype, count, in_place,
                   absl::StrCat("root ", root)),
              expected, Decode(dtype, out, count)));
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, AllToAllEveryDtype) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    // Element i of the block rank s sends to rank d: 10 * s + d + (i % 3).
    auto value = [](int s, int d, size_t i) {
      return static_cast<double>(10 * s + d) + static_cast<double>(i % 3);
    };
    for (DataType dtype : kAllDataTypes) {
      for (size_t count : {size_t{1}, size_t{7}}) {
        for (bool in_place : {false, true}) {
          std::vector<double> in(count * size), expected(count * size);
          for (int p = 0; p < size; ++p) {
            for (size_t i = 0; i < count; ++i) {
              in[p * count + i] = value(rank, p, i);
              expected[p * count + i] = value(p, rank, i);
            }
          }
          std::vector<char> send = Encode(dtype, in);
          std::vector<char> recv(send.size(), 0);
          char* out = in_place ? send.data() : recv.data();
          RETURN_IF_ERROR_T((*comm)->AllToAll(send.data(), out, count, dtype));
          RETURN_IF_ERROR_T(CheckEqual(What("alltoall", dtype, count, in_place),
                                       expected,
                                       Decode(dtype, out, count * size)));
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, SendRecvRingEveryDtype) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    const int right = (rank + 1) % size;
    const int left = (rank + size - 1) % size;
    for (DataType dtype : kAllDataTypes) {
      const size_t count = 29;
      std::vector<double> mine(count), expected(count);
      for (size_t i = 0; i < count; ++i) {
        mine[i] = InputValue(ReduceOp::kSum, dtype, rank, i);
        expected[i] = InputValue(ReduceOp::kSum, dtype, left, i);
      }
      std::vector<char> send = Encode(dtype, mine);
      std::vector<char> recv(send.size(), 0);
      // Even ranks send first, odd ranks receive first: works whether or not
      // Send blocks until matched.
      if (rank % 2 == 0) {
        RETURN_IF_ERROR_T((*comm)->Send(send.data(), count, dtype, right));
        RETURN_IF_ERROR_T((*comm)->Recv(recv.data(), count, dtype, left));
      } else {
        RETURN_IF_ERROR_T((*comm)->Recv(recv.data(), count, dtype, left));
        RETURN_IF_ERROR_T((*comm)->Send(send.data(), count, dtype, right));
      }
      RETURN_IF_ERROR_T(CheckEqual(
          absl::StrCat("recv from ", left, " ", DataTypeName(dtype)), expected,
          Decode(dtype, recv.data(), count)));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, BarrierWaitsForEveryRank) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (int round = 1; round <= 3; ++round) {
      auto added = store->Add("arrived", 1);
      if (!added.ok()) return added.status();
      RETURN_IF_ERROR_T((*comm)->Barrier());
      // Every rank added before anyone left the barrier.
      auto now = store->Add("arrived", 0);
      if (!now.ok()) return now.status();
      if (*now < static_cast<int64_t>(round) * size) {
        return absl::InternalError(absl::StrCat("after barrier ", round,
                                                " counter is ", *now));
      }
      RETURN_IF_ERROR_T((*comm)->Barrier());
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(CpuCollectivesTest, ZeroCountIsANoOp) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    RETURN_IF_ERROR_T((*comm)->AllReduce(nullptr, nullptr, 0,
                                         DataType::kFloat32, ReduceOp::kSum));
    RETURN_IF_ERROR_T((*comm)->AllGather(nullptr, nullptr, 0, DataType::kInt8));
    RETURN_IF_ERROR_T((*comm)->Barrier());
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// "<backend>_<n>ranks", the name of a (backend, ranks) test instance.
std::string BackendAndRanksName(
    const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  return absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param),
                      "ranks");
}

INSTANTIATE_TEST_SUITE_P(
    BackendsAndRanks, CpuCollectivesTest,
    ::testing::Combine(::testing::Values("gloo", "shm", "ucx"),
                       ::testing::Values(2, 4, 8)),
    BackendAndRanksName);

INSTANTIATE_TEST_SUITE_P(
    BackendsAndRanks, GlooAlgorithmSwitchTest,
    ::testing::Combine(::testing::Values("gloo", "shm", "ucx"),
                       ::testing::Values(3, 6, 8)),
    BackendAndRanksName);

}  // namespace
}  // namespace devmesh
