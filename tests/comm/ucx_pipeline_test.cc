// devmesh/tests/comm/ucx_pipeline_test.cc
// The "ucx" backend's pipelined ring all-reduce (comm/algorithms/
// p2p_collectives.h: blocks in pieces of kP2pPipelineChunkBytes) in real
// processes (ForkRanks) on 2, 3 and 4 members: counts whose blocks are one
// element shorter than, exactly, or one element longer than a multiple of
// the piece, blocks that differ by one element, a 1-byte dtype, and one
// count of many pieces; in place, out of place and with send and recv
// overlapping partially. Exact expected values (int32 and uint8 sums,
// float64 max), and for float32 sums (which round) the same bytes on every
// member (each member's FNV-1a hash of its result, all-gathered).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/algorithms/p2p_collectives.h"
#include "comm/communicator.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;
using testing::WorldOf;

constexpr size_t kPieceBytes = algorithms::kP2pPipelineChunkBytes;

// Counts for `n` members and elements of `elem_size` bytes: per-member
// blocks of k pieces - 1, k pieces and k pieces + 1 elements (k = 1, 3),
// each as n equal blocks and as n blocks of which n - 1 hold one more.
std::vector<size_t> EdgeCounts(int n, size_t elem_size) {
  const size_t piece = kPieceBytes / elem_size;
  std::vector<size_t> counts;
  for (size_t k : {size_t{1}, size_t{3}}) {
    for (size_t per_block : {k * piece - 1, k * piece, k * piece + 1}) {
      counts.push_back(per_block * n);
      counts.push_back(per_block * n + n - 1);
    }
  }
  return counts;
}

uint64_t Fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string What(absl::string_view dtype, size_t count, absl::string_view how) {
  return absl::StrCat("allreduce ", dtype, " count ", count, " ", how);
}

// int32 sums: send[i] = (rank + 1) * (i % 1000 + 1); out of place, in place,
// and recv two elements past send.
absl::Status Int32Sums(Communicator& comm, size_t count) {
  const int rank = comm.rank();
  const int size = comm.size();
  const int32_t ranks_sum = size * (size + 1) / 2;
  for (int how = 0; how < 3; ++how) {
    std::vector<int32_t> buf(2 * count + 2, -7);
    int32_t* send = buf.data();
    int32_t* recv = how == 0 ? buf.data() + count + 2
                             : how == 1 ? send : send + 2;
    for (size_t i = 0; i < count; ++i) {
      send[i] = (rank + 1) * static_cast<int32_t>(i % 1000 + 1);
    }
    DEVMESH_RETURN_IF_ERROR(comm.AllReduce(send, recv, count,
                                           DataType::kInt32, ReduceOp::kSum));
    const char* name = how == 0 ? "out of place" : how == 1 ? "in place"
                                                            : "overlapping";
    for (size_t i = 0; i < count; ++i) {
      const int32_t want = ranks_sum * static_cast<int32_t>(i % 1000 + 1);
      if (recv[i] != want) {
        return absl::InternalError(absl::StrCat(What("int32", count, name),
                                                ": [", i, "] = ", recv[i],
                                                ", want ", want));
      }
    }
    const int32_t last =
        (rank + 1) * static_cast<int32_t>((count - 1) % 1000 + 1);
    if (how == 0 && send[count - 1] != last) {
      return absl::InternalError(
          absl::StrCat(What("int32", count, name), ": send changed"));
    }
  }
  return absl::OkStatus();
}

// uint8 sums (wrapping): send[i] = (rank + 1) * (i % 7 + 1).
absl::Status Uint8Sums(Communicator& comm, size_t count) {
  const int size = comm.size();
  std::vector<uint8_t> send(count), recv(count, 0x5a);
  for (size_t i = 0; i < count; ++i) {
    send[i] = static_cast<uint8_t>((comm.rank() + 1) * (i % 7 + 1));
  }
  DEVMESH_RETURN_IF_ERROR(comm.AllReduce(send.data(), recv.data(), count,
                                         DataType::kUInt8, ReduceOp::kSum));
  for (size_t i = 0; i < count; ++i) {
    const auto want =
        static_cast<uint8_t>(size * (size + 1) / 2 * (i % 7 + 1));
    if (recv[i] != want) {
      return absl::InternalError(absl::StrCat(What("uint8", count, ""), ": [",
                                              i, "] = ", int{recv[i]},
                                              ", want ", int{want}));
    }
  }
  return absl::OkStatus();
}

// float64 max: send[i] = i * 0.5 + (rank == i % size ? 1000 : rank).
absl::Status Float64Max(Communicator& comm, size_t count) {
  const int rank = comm.rank();
  const int size = comm.size();
  std::vector<double> buf(count);
  for (size_t i = 0; i < count; ++i) {
    buf[i] = i * 0.5 + (static_cast<size_t>(rank) == i % size ? 1000 : rank);
  }
  DEVMESH_RETURN_IF_ERROR(comm.AllReduce(buf.data(), buf.data(), count,
                                         DataType::kFloat64, ReduceOp::kMax));
  for (size_t i = 0; i < count; ++i) {
    if (buf[i] != i * 0.5 + 1000) {
      return absl::InternalError(absl::StrCat(What("float64 max", count, ""),
                                              ": [", i, "] = ", buf[i]));
    }
  }
  return absl::OkStatus();
}

// float32 sums of values that round: the same bytes on every member.
absl::Status Float32SameBytes(Communicator& comm, size_t count) {
  std::vector<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) {
    send[i] = 1.0f / static_cast<float>(i % 97 + 3 + comm.rank());
  }
  DEVMESH_RETURN_IF_ERROR(comm.AllReduce(send.data(), recv.data(), count,
                                         DataType::kFloat32, ReduceOp::kSum));
  const auto mine =
      static_cast<int64_t>(Fnv1a(recv.data(), count * sizeof(float)));
  std::vector<int64_t> all(comm.size());
  DEVMESH_RETURN_IF_ERROR(
      comm.AllGather(&mine, all.data(), 1, DataType::kInt64));
  for (int r = 0; r < comm.size(); ++r) {
    if (all[r] != mine) {
      return absl::InternalError(absl::StrCat(
          What("float32", count, ""), ": rank ", r, "'s bytes hash to ",
          all[r], ", this rank's to ", mine));
    }
  }
  return absl::OkStatus();
}

class UcxPipelineTest : public ::testing::TestWithParam<int> {};

TEST_P(UcxPipelineTest, PieceEdges) {
  absl::Status status = ForkRanks(GetParam(), [](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                             WorldOf("ucx", rank, size, std::move(store)));
    for (size_t count : EdgeCounts(size, sizeof(int32_t))) {
      DEVMESH_RETURN_IF_ERROR(Int32Sums(*comm, count));
      DEVMESH_RETURN_IF_ERROR(Float32SameBytes(*comm, count));
    }
    for (size_t count : EdgeCounts(size, sizeof(double))) {
      DEVMESH_RETURN_IF_ERROR(Float64Max(*comm, count));
    }
    for (size_t count : EdgeCounts(size, 1)) {
      DEVMESH_RETURN_IF_ERROR(Uint8Sums(*comm, count));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// 16 MiB and 3 elements of int32: many pieces per block.
TEST_P(UcxPipelineTest, ManyPieces) {
  absl::Status status = ForkRanks(GetParam(), [](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                             WorldOf("ucx", rank, size, std::move(store)));
    const size_t count = (size_t{16} << 20) / sizeof(int32_t) + 3;
    DEVMESH_RETURN_IF_ERROR(Int32Sums(*comm, count));
    return Float32SameBytes(*comm, count);
  });
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Members, UcxPipelineTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "ranks");
                         });

}  // namespace
}  // namespace devmesh
