// devmesh/tests/comm/engine_collectives_test.cc
// Reduce, Gather, Scatter and AllToAllV on the CPU backends (Gloo, shared
// memory: "shm", and UCX), in real processes at odd group sizes (1, 3, 5),
// against exact expected values: every dtype (x every op for Reduce), every
// root, in place and out of place; AllToAllV with uneven, empty and
// reordered blocks; members whose AllToAllV counts differ all fail alike;
// the typed forms' length checks.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
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

#define RETURN_IF_ERROR_T(expr) \
  do {                          \
    absl::Status _s = (expr);   \
    if (!_s.ok()) return _s;    \
  } while (0)

absl::StatusOr<std::unique_ptr<Communicator>> World(
    const std::string& backend, int rank, int size,
    std::shared_ptr<Store> store) {
  return testing::WorldOf(backend, rank, size, std::move(store));
}

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// (backend, ranks).
class EngineCollectivesTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  static std::string Backend() { return std::get<0>(GetParam()); }
  static int Nproc() { return std::get<1>(GetParam()); }
};

TEST_P(EngineCollectivesTest, ReduceEveryDtypeOpAndRoot) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (int root = 0; root < size; ++root) {
          for (bool in_place : {false, true}) {
            const size_t count = 11;
            std::vector<double> in(count), expected(count);
            for (size_t i = 0; i < count; ++i) {
              in[i] = InputValue(op, dtype, rank, i);
              std::vector<double> all(size);
              for (int r = 0; r < size; ++r) {
                all[r] = InputValue(op, dtype, r, i);
              }
              expected[i] = ReduceValues(op, dtype, all);
            }
            // Rounded to the dtype (an average over 3 or 5 ranks is not
            // exact).
            expected = Decode(dtype, Encode(dtype, expected).data(), count);
            std::vector<char> send = Encode(dtype, in);
            const std::vector<char> original = send;
            // Off the root recv is not touched: a sentinel shows it.
            std::vector<char> recv(send.size(), 0x5a);
            const std::vector<char> sentinel = recv;
            char* out = in_place && rank == root ? send.data() : recv.data();
            RETURN_IF_ERROR_T((*comm)->Reduce(send.data(), out, count, dtype,
                                              op, root));
            const std::string what =
                absl::StrCat("reduce ", DataTypeName(dtype), " ",
                             ReduceOpName(op), " root ", root,
                             in_place ? " in place" : "");
            if (rank == root) {
              RETURN_IF_ERROR_T(
                  CheckEqual(what, expected, Decode(dtype, out, count)));
            } else {
              RETURN_IF_ERROR_T(Expect(recv == sentinel,
                                       what + ": recv written off the root"));
              RETURN_IF_ERROR_T(Expect(send == original,
                                       what + ": send changed off the root"));
            }
          }
        }
      }
    }
    // Off the root recv may be null.
    float x = static_cast<float>(rank + 1), sum = 0;
    for (int root = 0; root < size; ++root) {
      RETURN_IF_ERROR_T((*comm)->Reduce(&x, rank == root ? &sum : nullptr, 1,
                                        DataType::kFloat32, ReduceOp::kSum,
                                        root));
      if (rank == root) {
        RETURN_IF_ERROR_T(Expect(sum == size * (size + 1) / 2.0f,
                                 absl::StrCat("reduce with null recv: ", sum)));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(EngineCollectivesTest, GatherAndScatterEveryDtypeAndRoot) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    // Element i of rank r's block: 10 * r + i % 7 (exact in every dtype).
    auto value = [](int r, size_t i) {
      return static_cast<double>(10 * r) + static_cast<double>(i % 7);
    };
    for (DataType dtype : kAllDataTypes) {
      for (size_t count : {size_t{1}, size_t{9}}) {
        for (int root = 0; root < size; ++root) {
          for (bool in_place : {false, true}) {
            const std::string tail =
                absl::StrCat(" ", DataTypeName(dtype), " x ", count, " root ",
                             root, in_place ? " in place" : "");
            std::vector<double> all(count * size), mine(count);
            for (int r = 0; r < size; ++r) {
              for (size_t i = 0; i < count; ++i) {
                all[r * count + i] = value(r, i);
              }
            }
            for (size_t i = 0; i < count; ++i) mine[i] = value(rank, i);
            const size_t width = DataTypeSize(dtype);
            // Gather: the root's recv is the whole; in place its own block
            // already sits in it.
            {
              std::vector<char> send = Encode(dtype, mine);
              std::vector<char> recv(count * size * width, 0);
              if (in_place && rank == root) {
                std::memcpy(recv.data() + root * count * width, send.data(),
                            count * width);
              }
              const void* in = in_place && rank == root
                                   ? recv.data() + root * count * width
                                   : send.data();
              RETURN_IF_ERROR_T((*comm)->Gather(
                  in, rank == root ? recv.data() : nullptr, count, dtype,
                  root));
              if (rank == root) {
                RETURN_IF_ERROR_T(CheckEqual(
                    "gather" + tail, all,
                    Decode(dtype, recv.data(), count * size)));
              }
            }
            // Scatter: every rank gets its block of the root's whole.
            {
              std::vector<char> send =
                  rank == root ? Encode(dtype, all) : std::vector<char>();
              std::vector<char> recv(count * width, 0);
              void* out = in_place && rank == root
                              ? send.data() + root * count * width
                              : recv.data();
              RETURN_IF_ERROR_T((*comm)->Scatter(
                  rank == root ? send.data() : nullptr, out, count, dtype,
                  root));
              RETURN_IF_ERROR_T(CheckEqual("scatter" + tail, mine,
                                           Decode(dtype, out, count)));
              if (rank == root) {
                RETURN_IF_ERROR_T(
                    CheckEqual("scatter" + tail + ": root's send", all,
                               Decode(dtype, send.data(), count * size)));
              }
            }
          }
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Rank s sends (s + d) % 3 + (s == d ? 2 : 0) elements to rank d (some
// empty, uneven), value 20 * s + 4 * d + i (i < 4: distinct, and exact in
// int8 and bfloat16 up to 5 ranks); blocks stored in reverse peer order with
// a gap, to use the offsets.
size_t Count(int s, int d) { return (s + d) % 3 + (s == d ? 2 : 0); }
double Value(int s, int d, size_t i) {
  return 20.0 * s + 4.0 * d + static_cast<double>(i);
}

TEST_P(EngineCollectivesTest, AllToAllVUnevenBlocksEveryDtype) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    for (DataType dtype : kAllDataTypes) {
      std::vector<size_t> send_counts(size), send_offsets(size),
          recv_counts(size), recv_offsets(size);
      size_t send_len = 0, recv_len = 0;
      for (int p = size - 1; p >= 0; --p) {
        send_counts[p] = Count(rank, p);
        send_offsets[p] = send_len;
        send_len += send_counts[p] + 1;  // a gap of one element
        recv_counts[p] = Count(p, rank);
        recv_offsets[p] = recv_len;
        recv_len += recv_counts[p] + 1;
      }
      std::vector<double> in(send_len, -1.0);
      for (int p = 0; p < size; ++p) {
        for (size_t i = 0; i < send_counts[p]; ++i) {
          in[send_offsets[p] + i] = Value(rank, p, i);
        }
      }
      std::vector<char> send = Encode(dtype, in);
      std::vector<char> recv = Encode(dtype, std::vector<double>(recv_len, 7));
      RETURN_IF_ERROR_T((*comm)->AllToAllV(send.data(), send_counts,
                                           send_offsets, recv.data(),
                                           recv_counts, recv_offsets, dtype));
      std::vector<double> expected(recv_len, 7);
      for (int p = 0; p < size; ++p) {
        for (size_t i = 0; i < recv_counts[p]; ++i) {
          expected[recv_offsets[p] + i] = Value(p, rank, i);
        }
      }
      RETURN_IF_ERROR_T(CheckEqual(
          absl::StrCat("alltoallv ", DataTypeName(dtype)), expected,
          Decode(dtype, recv.data(), recv_len)));
    }
    // The typed form over contiguous blocks.
    std::vector<size_t> send_counts(size), recv_counts(size);
    std::vector<int64_t> send, expected;
    for (int p = 0; p < size; ++p) {
      send_counts[p] = Count(rank, p);
      recv_counts[p] = Count(p, rank);
      for (size_t i = 0; i < send_counts[p]; ++i) {
        send.push_back(static_cast<int64_t>(Value(rank, p, i)));
      }
      for (size_t i = 0; i < recv_counts[p]; ++i) {
        expected.push_back(static_cast<int64_t>(Value(p, rank, i)));
      }
    }
    std::vector<int64_t> recv(expected.size(), -1);
    RETURN_IF_ERROR_T((*comm)->AllToAllV<int64_t>(send, send_counts,
                                                  absl::MakeSpan(recv),
                                                  recv_counts));
    RETURN_IF_ERROR_T(Expect(recv == expected, "typed alltoallv"));
    // Nothing to move at all.
    std::vector<size_t> zeros(size, 0);
    RETURN_IF_ERROR_T((*comm)->AllToAllV(nullptr, zeros, zeros, nullptr,
                                         zeros, zeros, DataType::kFloat32));
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Blocks far larger than a shared-memory slot, uneven (member s sends
// member d 100000 * ((s + d) % 3) + 7 * d int32), so that the data moves in
// many rounds and blocks end in different rounds: exact values.
TEST_P(EngineCollectivesTest, AllToAllVLargeUnevenBlocks) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    auto count = [](int s, int d) -> size_t {
      return 100000 * static_cast<size_t>((s + d) % 3) + 7 * d;
    };
    auto value = [](int s, int d, size_t i) {
      return static_cast<int32_t>(1000000 * s + 100000 * d + i % 99991);
    };
    std::vector<size_t> sc(size), rc(size);
    std::vector<int32_t> send, want;
    for (int p = 0; p < size; ++p) {
      sc[p] = count(rank, p);
      rc[p] = count(p, rank);
      for (size_t i = 0; i < sc[p]; ++i) send.push_back(value(rank, p, i));
      for (size_t i = 0; i < rc[p]; ++i) want.push_back(value(p, rank, i));
    }
    std::vector<int32_t> recv(want.size(), -1);
    for (int round = 0; round < 2; ++round) {
      RETURN_IF_ERROR_T((*comm)->AllToAllV<int32_t>(send, sc,
                                                    absl::MakeSpan(recv), rc));
      RETURN_IF_ERROR_T(Expect(recv == want, "large alltoallv"));
      std::fill(recv.begin(), recv.end(), -1);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 1 expects one element more from rank 0 than rank 0 sends it: every
// member fails with the same InvalidArgument naming both counts and the
// receiver, and the group goes on (the next call is exact).
TEST_P(EngineCollectivesTest, AllToAllVCountsThatDifferFailEveryMember) {
  if (Nproc() < 2) GTEST_SKIP() << "needs two members";
  const std::string backend = Backend();
  const int n = Nproc();
  absl::Status status = ForkRanks(n, [backend, n](
                                         int rank, int size,
                                         std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    std::vector<size_t> send_counts(size, 2), recv_counts(size, 2),
        offsets(size);
    for (int p = 0; p < size; ++p) offsets[p] = 3 * p;
    // Rank 1 expects 3 from rank 0; the last rank also expects 5 from
    // rank 1 (a second pair, higher in (receiver, sender) order): the
    // error names the lowest pair only.
    if (rank == 1) recv_counts[0] = 3;
    if (size > 2 && rank == size - 1) recv_counts[1] = 5;
    std::vector<float> send(3 * size, 1.0f), recv(3 * size, 0.0f);
    absl::Status s = (*comm)->AllToAllV(send.data(), send_counts, offsets,
                                        recv.data(), recv_counts, offsets,
                                        DataType::kFloat32);
    std::string group;
    for (int p = 0; p < n; ++p) absl::StrAppend(&group, p ? ", " : "", p);
    const std::string want = absl::StrCat(
        backend,
        " alltoallv call #1: the members' counts differ: global rank 0 sends "
        "2 float32 elements to global rank 1, which expects 3 from it; "
        "nothing was delivered (group of global ranks [",
        group, "])");
    RETURN_IF_ERROR_T(Expect(absl::IsInvalidArgument(s) && s.message() == want,
                             absl::StrCat("got ", s.ToString(), "\nwant ",
                                          want)));
    RETURN_IF_ERROR_T(Expect(DisagreeingRank(s) == 1, "payload"));
    RETURN_IF_ERROR_T(
        Expect(recv == std::vector<float>(3 * size, 0.0f), "recv written"));
    // The group goes on.
    int64_t x = rank, total = 0;
    RETURN_IF_ERROR_T((*comm)->Reduce(&x, &total, 1, DataType::kInt64,
                                      ReduceOp::kSum, 0));
    if (rank == 0) {
      RETURN_IF_ERROR_T(Expect(total == size * (size - 1) / 2, "next call"));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Members that name different roots: the per-call check of shm and UCX
// fails every member with InvalidArgument naming the odd call, with a
// kDisagreementPayload (which member it names depends on who saw what
// first on UCX). Gloo has no per-call check unless verify_calls is on.
TEST_P(EngineCollectivesTest, RootsThatDifferFailEveryMember) {
  if (Nproc() < 2) GTEST_SKIP() << "needs two members";
  if (Backend() == "gloo") GTEST_SKIP() << "Gloo checks calls only on request";
  const std::string backend = Backend();
  absl::Status status = ForkRanks(Nproc(), [backend](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    float x = 1, all[8] = {};
    const int root = rank == 1 ? 1 : 0;
    absl::Status s = (*comm)->Gather(&x, all, 1, DataType::kFloat32, root);
    return Expect(absl::IsInvalidArgument(s) &&
                      absl::StrContains(s.message(),
                                        "gather float32 x 1 to root 1") &&
                      DisagreeingRank(s) >= 0,
                  absl::StrCat("got ", s.ToString()));
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Each member sends int32 x 3 to every other member and float64 x (1 + s +
// d) to the higher ones, and receives the matching messages, all in one
// batch whose order of peers differs on every member and round (receives
// first, sends first, either interleaved): exact values.
TEST_P(EngineCollectivesTest, BatchSendRecvInAnyOrder) {
  absl::Status status = ForkRanks(Nproc(), [backend = Backend()](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    auto ints = [](int s, int d) {
      return std::vector<int32_t>{100 * s + d, -s, d};
    };
    auto doubles = [](int s, int d) {
      std::vector<double> v(1 + s + d);
      for (size_t i = 0; i < v.size(); ++i) v[i] = s + 0.25 * d + 1000.0 * i;
      return v;
    };
    for (int round = 0; round < 3; ++round) {
      std::vector<std::vector<int32_t>> int_out(size), int_in(size);
      std::vector<std::vector<double>> dbl_out(size), dbl_in(size);
      // Peers in an order of this member's and round's own.
      std::vector<int> peers;
      for (int p = 0; p < size; ++p) {
        if (p != rank) peers.push_back(p);
      }
      std::sort(peers.begin(), peers.end(), [&](int a, int b) {
        auto key = [&](int p) { return (p * 7 + rank * 5 * (round + 1)) % 11; };
        return key(a) != key(b) ? key(a) < key(b) : a < b;
      });
      std::vector<P2POp> ops;
      for (int p : peers) {
        int_out[p] = ints(rank, p);
        int_in[p].assign(3, 0);
        P2POp ri = P2POp::Recv(absl::MakeSpan(int_in[p]), p);
        P2POp si = P2POp::Send(absl::MakeConstSpan(int_out[p]), p);
        P2POp d;
        if (p > rank) {
          dbl_out[p] = doubles(rank, p);
          d = P2POp::Send(dbl_out[p].data(), dbl_out[p].size(),
                          DataType::kFloat64, p);
        } else {
          dbl_in[p].assign(doubles(p, rank).size(), 0);
          d = P2POp::Recv(dbl_in[p].data(), dbl_in[p].size(),
                          DataType::kFloat64, p);
        }
        // Receives first, sends first, the float64 first: the messages of
        // one direction of a pair stay in the same order on both sides.
        const std::vector<P2POp> mine =
            round == 0 ? std::vector<P2POp>{ri, si, d}
            : round == 1 ? std::vector<P2POp>{d, si, ri}
                         : std::vector<P2POp>{si, ri, d};
        ops.insert(ops.end(), mine.begin(), mine.end());
      }
      RETURN_IF_ERROR_T((*comm)->BatchSendRecv(ops));
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        RETURN_IF_ERROR_T(Expect(int_in[p] == ints(p, rank),
                                 absl::StrCat("round ", round, " int32 from ",
                                              p)));
        if (p < rank) {
          RETURN_IF_ERROR_T(Expect(dbl_in[p] == doubles(p, rank),
                                   absl::StrCat("round ", round,
                                                " float64 from ", p)));
        }
      }
    }
    // An empty batch is OK.
    return (*comm)->BatchSendRecv({});
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A Recv that differs from its Send (dtype at equal bytes, a shorter and a
// longer count, a message past the inline size) fails the receiver with
// InvalidArgument naming both calls and the sender; the pair goes on. On
// Gloo and on shm (whose Send/Recv run on Gloo pairs); UCX words its own.
TEST_P(EngineCollectivesTest, SendAndRecvThatDifferFailTheReceiver) {
  if (Nproc() < 2) GTEST_SKIP() << "needs two members";
  // shm's Send and Recv run on a two-member group of the cross-host
  // backend, UCX by default (comm/shm/shm_links.h), whose mismatches and
  // their text ucx_errors_test covers; a UCX group keeps its first error,
  // so the pair does not go on as a Gloo pair does here.
  if (Backend() == "ucx" || Backend() == "shm") {
    GTEST_SKIP() << "ucx_errors_test covers UCX and shm's UCX pairs";
  }
  const std::string backend = Backend();
  absl::Status status = ForkRanks(Nproc(), [backend](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    if (rank > 1) return absl::OkStatus();
    struct Case {
      DataType send_dtype;
      size_t send_count;
      DataType recv_dtype;
      size_t recv_count;
    };
    const Case cases[] = {
        {DataType::kInt64, 4, DataType::kFloat32, 8},
        {DataType::kFloat32, 100, DataType::kFloat32, 50},
        {DataType::kFloat32, 50, DataType::kFloat32, 100},
        {DataType::kUInt8, 200000, DataType::kUInt8, 10},
        {DataType::kUInt8, 10, DataType::kUInt8, 200000},
    };
    for (const Case& c : cases) {
      std::vector<char> buf(
          std::max(c.send_count * DataTypeSize(c.send_dtype),
                   c.recv_count * DataTypeSize(c.recv_dtype)),
          1);
      if (rank == 0) {
        RETURN_IF_ERROR_T(
            (*comm)->Send(buf.data(), c.send_count, c.send_dtype, 1));
      } else {
        absl::Status s =
            (*comm)->Recv(buf.data(), c.recv_count, c.recv_dtype, 0);
        const std::string want = absl::StrCat(
            "global rank 0 sent ", DataTypeName(c.send_dtype), " x ",
            c.send_count, " and this rank receives ",
            DataTypeName(c.recv_dtype), " x ", c.recv_count);
        RETURN_IF_ERROR_T(Expect(absl::IsInvalidArgument(s) &&
                                     absl::StrContains(s.message(), want) &&
                                     DisagreeingRank(s) == 0,
                                 absl::StrCat("got ", s.ToString(),
                                              "\nwant ", want)));
      }
      // The pair goes on: an exact exchange, inline and past 64 KiB.
      for (size_t n : {size_t{1}, size_t{70000}}) {
        std::vector<int32_t> v(n, rank == 0 ? 42 : 0);
        if (rank == 0) {
          RETURN_IF_ERROR_T((*comm)->Send(v.data(), n, DataType::kInt32, 1));
        } else {
          RETURN_IF_ERROR_T((*comm)->Recv(v.data(), n, DataType::kInt32, 0));
          RETURN_IF_ERROR_T(Expect(v == std::vector<int32_t>(n, 42),
                                   "next message"));
        }
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// The front's and the typed forms' argument checks, on this rank only.
TEST_P(EngineCollectivesTest, BadArgumentsAreInvalidArgument) {
  const std::string backend = Backend();
  absl::Status status = ForkRanks(Nproc(), [backend](
                                               int rank, int size,
                                               std::shared_ptr<Store> store) {
    auto comm = World(backend, rank, size, store);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    auto is = [&](const absl::Status& s, const std::string& message) {
      return Expect(absl::IsInvalidArgument(s) && s.message() == message,
                    absl::StrCat("got ", s.ToString(), "\nwant ", message));
    };
    float x[64] = {};
    RETURN_IF_ERROR_T(is(c.Reduce(x, x, 1, DataType::kFloat32, ReduceOp::kSum,
                                  size),
                         absl::StrCat(backend, " reduce: root ", size,
                                      " is outside [0, ", size, ")")));
    RETURN_IF_ERROR_T(is(c.Gather(x, nullptr, 1, DataType::kFloat32, rank),
                         absl::StrCat(backend,
                                      " gather: recv buffer is null with "
                                      "count 1")));
    RETURN_IF_ERROR_T(is(c.Scatter(nullptr, x, 1, DataType::kFloat32, rank),
                         absl::StrCat(backend,
                                      " scatter: send buffer is null with "
                                      "count 1")));
    std::vector<size_t> ok(size, 1), offsets(size), short_span(size + 1, 0);
    for (int p = 0; p < size; ++p) offsets[p] = p;
    RETURN_IF_ERROR_T(is(
        c.AllToAllV(x, short_span, offsets, x + 32, ok, offsets,
                    DataType::kFloat32),
        absl::StrCat(backend, " alltoallv: send_counts has ", size + 1,
                     " entries for a group of ", size)));
    RETURN_IF_ERROR_T(is(c.AllToAllV(x, ok, offsets, x, ok, offsets,
                                     DataType::kFloat32),
                         absl::StrCat(backend,
                                      " alltoallv: send and recv overlap")));
    std::vector<size_t> huge(size, 1);
    huge[0] = SIZE_MAX / 2;
    RETURN_IF_ERROR_T(is(
        c.AllToAllV(x, ok, huge, x + 32, ok, offsets, DataType::kFloat32),
        absl::StrCat(backend, " alltoallv: block 0 of send (offset ",
                     SIZE_MAX / 2, ", count 1) overflows the byte count")));
    const P2POp self[] = {P2POp::Send(x, 1, DataType::kFloat32, 0),
                          P2POp::Recv(x, 1, DataType::kFloat32, rank)};
    if (size > 1 && rank > 0) {
      RETURN_IF_ERROR_T(is(c.BatchSendRecv(self),
                           absl::StrCat(backend, " recv: peer ", rank,
                                        " is this rank (batch op #1)")));
    }
    const P2POp null_buf[] = {P2POp::Recv(nullptr, 2, DataType::kInt8, 0)};
    if (rank > 0) {
      RETURN_IF_ERROR_T(is(c.BatchSendRecv(null_buf),
                           absl::StrCat(backend,
                                        " recv: recv buffer is null with "
                                        "count 2 (batch op #0)")));
    }
    std::vector<int32_t> two(2), three(3);
    RETURN_IF_ERROR_T(is(
        c.Reduce<int32_t>(two, absl::MakeSpan(three), ReduceOp::kSum, rank),
        "Reduce: send has 2 int32 elements and recv has 3; they must be the "
        "same length on the root"));
    RETURN_IF_ERROR_T(is(
        c.AllToAllV<int32_t>(two, ok, absl::MakeSpan(three), ok),
        size == 2 ? "AllToAllV: recv has 3 int32 elements and recv_counts "
                    "sum to 2; they must be equal"
                  : absl::StrCat("AllToAllV: send has 2 int32 elements and "
                                 "send_counts sum to ",
                                 size, "; they must be equal")));
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

std::string BackendAndRanksName(
    const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  return absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param),
                      "ranks");
}

INSTANTIATE_TEST_SUITE_P(
    BackendsAndRanks, EngineCollectivesTest,
    ::testing::Combine(::testing::Values("gloo", "shm", "ucx"),
                       ::testing::Values(1, 3, 5)),
    BackendAndRanksName);

}  // namespace
}  // namespace devmesh
