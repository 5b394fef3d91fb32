// devmesh/tests/comm/p2p_collectives_test.cc
// The point-to-point collectives (comm/algorithms/p2p_collectives.h) over an
// in-process transport: one thread per rank, one FIFO mailbox per ordered
// pair of ranks. Every collective x group sizes 1 to 8 x counts (both
// all-reduce paths) x every dtype (x every op), in place and out of place,
// against exact expected values; identical all-reduce bits on every rank;
// overlapping buffers; the message count of each algorithm.
#include "comm/algorithms/p2p_collectives.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/dtype.h"
#include "comm/reduce_functions.h"
#include "gtest/gtest.h"
#include "tests/comm/typed_values.h"

namespace devmesh {
namespace {

using algorithms::PointToPoint;
using algorithms::RecvSpec;
using algorithms::SendSpec;
using algorithms::Workspace;
using testing::CheckEqual;
using testing::Decode;
using testing::Encode;
using testing::InputValue;
using testing::ReduceValues;

// Above kP2pSmallAllReduceBytes for every dtype (int8 included), and not a
// multiple of any group size tested: the ring's chunks differ in size.
constexpr size_t kLargeCount = 70001;
static_assert(kLargeCount > algorithms::kP2pSmallAllReduceBytes, "");

constexpr size_t kCounts[] = {0, 1, 3, 13, 1031, kLargeCount};

// A receive that waits longer than this fails the rank (a deadlock then
// fails the test instead of hanging it).
constexpr auto kRecvTimeout = std::chrono::seconds(30);

// The messages from one rank to another, in send order.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<char>> queue;
};

// What one rank posted.
struct RankStats {
  int exchanges = 0;
  int sends = 0;  // by Exchange and Post
  int posted_recvs = 0;
};

// PointToPoint over mailboxes shared by the threads of one group. Exchange
// pushes every send, then pops each receive from its peer's mailbox, and
// checks the contract's preconditions on the way.
class ThreadP2p : public PointToPoint {
 public:
  ThreadP2p(std::vector<std::unique_ptr<Mailbox>>& boxes, int rank, int size)
      : boxes_(boxes), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const RankStats& stats() const { return stats_; }

  // Post of a send delivers it at once; Post of a receive records it, and
  // Wait takes the messages of that peer's earlier receives first.
  absl::StatusOr<algorithms::Ticket> Post(const SendSpec& send) override {
    if (absl::Status st = CheckPeer(send.peer); !st.ok()) return st;
    ++stats_.sends;
    Deliver(send);
    posted_.push_back(Posted{true, {}});
    return posted_.size() - 1;
  }
  absl::StatusOr<algorithms::Ticket> Post(const RecvSpec& recv) override {
    if (absl::Status st = CheckPeer(recv.peer); !st.ok()) return st;
    for (const Posted& p : posted_) {
      if (!p.is_send && !p.done &&
          Overlap(recv.data, recv.bytes, p.recv.data, p.recv.bytes)) {
        return absl::InternalError("two pending receives overlap");
      }
    }
    ++stats_.posted_recvs;
    posted_.push_back(Posted{false, recv});
    return posted_.size() - 1;
  }
  absl::Status Wait(algorithms::Ticket ticket) override {
    if (ticket >= posted_.size()) {
      return absl::InternalError(absl::StrCat("Wait(", ticket, ") of ",
                                              posted_.size(), " posted"));
    }
    for (size_t i = 0; i <= ticket; ++i) {
      Posted& p = posted_[i];
      if (p.is_send || p.done) continue;
      if (i < ticket && p.recv.peer != posted_[ticket].recv.peer) continue;
      if (absl::Status st = Take(p.recv); !st.ok()) return st;
      p.done = true;
    }
    return absl::OkStatus();
  }
  absl::Status WaitAll() override {
    for (Posted& p : posted_) {
      if (p.is_send || p.done) continue;
      if (absl::Status st = Take(p.recv); !st.ok()) return st;
      p.done = true;
    }
    posted_.clear();
    return absl::OkStatus();
  }

  absl::Status Exchange(absl::Span<const SendSpec> sends,
                        absl::Span<const RecvSpec> recvs) override {
    if (!posted_.empty()) {
      return absl::InternalError("Exchange with messages posted");
    }
    ++stats_.exchanges;
    stats_.sends += static_cast<int>(sends.size());
    for (const SendSpec& s : sends) {
      if (absl::Status st = CheckPeer(s.peer); !st.ok()) return st;
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
      if (absl::Status st = CheckPeer(recvs[i].peer); !st.ok()) return st;
      for (const SendSpec& s : sends) {
        if (Overlap(recvs[i].data, recvs[i].bytes, s.data, s.bytes)) {
          return absl::InternalError("a receive overlaps a send");
        }
      }
      for (size_t j = 0; j < i; ++j) {
        if (Overlap(recvs[i].data, recvs[i].bytes, recvs[j].data,
                    recvs[j].bytes)) {
          return absl::InternalError("two receives overlap");
        }
      }
    }
    for (const SendSpec& s : sends) Deliver(s);
    for (const RecvSpec& r : recvs) {
      if (absl::Status st = Take(r); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  struct Posted {
    bool is_send = false;
    RecvSpec recv;
    bool done = false;
  };
  void Deliver(const SendSpec& s) {
    Mailbox& box = Box(rank_, s.peer);
    const char* data = static_cast<const char*>(s.data);
    {
      std::lock_guard<std::mutex> lock(box.mu);
      box.queue.emplace_back(data, data + s.bytes);
    }
    box.cv.notify_all();
  }
  absl::Status Take(const RecvSpec& r) {
    Mailbox& box = Box(r.peer, rank_);
    std::vector<char> message;
    {
      std::unique_lock<std::mutex> lock(box.mu);
      if (!box.cv.wait_for(lock, kRecvTimeout,
                           [&] { return !box.queue.empty(); })) {
        return absl::DeadlineExceededError(
            absl::StrCat("nothing from rank ", r.peer));
      }
      message = std::move(box.queue.front());
      box.queue.pop_front();
    }
    if (message.size() != r.bytes) {
      return absl::InternalError(
          absl::StrCat("from rank ", r.peer, ": ", message.size(),
                       " bytes, receive posted for ", r.bytes));
    }
    if (!message.empty()) std::memcpy(r.data, message.data(), r.bytes);
    return absl::OkStatus();
  }

  static bool Overlap(const void* a, size_t a_bytes, const void* b,
                      size_t b_bytes) {
    const auto x = reinterpret_cast<uintptr_t>(a);
    const auto y = reinterpret_cast<uintptr_t>(b);
    return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
  }
  absl::Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return absl::InternalError(absl::StrCat("bad peer ", peer));
    }
    return absl::OkStatus();
  }
  Mailbox& Box(int src, int dst) { return *boxes_[src * size_ + dst]; }

  std::vector<std::unique_ptr<Mailbox>>& boxes_;
  const int rank_;
  const int size_;
  RankStats stats_;
  std::vector<Posted> posted_;
};

using RankBody = std::function<absl::Status(PointToPoint&, Workspace&)>;

// Runs body on `n` threads, one per rank, over fresh mailboxes. Returns the
// first rank's error (prefixed with the rank), or InternalError when a
// message was left unreceived. `stats`, when given, gets each rank's.
absl::Status RunRanks(int n, const RankBody& body,
                      std::vector<RankStats>* stats = nullptr) {
  std::vector<std::unique_ptr<Mailbox>> boxes;
  for (int i = 0; i < n * n; ++i) boxes.push_back(std::make_unique<Mailbox>());
  std::vector<std::unique_ptr<ThreadP2p>> p2ps;
  for (int r = 0; r < n; ++r) {
    p2ps.push_back(std::make_unique<ThreadP2p>(boxes, r, n));
  }
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Workspace ws;
      statuses[r] = body(*p2ps[r], ws);
    });
  }
  for (std::thread& t : threads) t.join();
  if (stats != nullptr) {
    stats->clear();
    for (const auto& p : p2ps) stats->push_back(p->stats());
  }
  for (int r = 0; r < n; ++r) {
    if (!statuses[r].ok()) {
      return absl::Status(statuses[r].code(),
                          absl::StrCat("rank ", r, ": ",
                                       statuses[r].message()));
    }
  }
  for (int i = 0; i < n * n; ++i) {
    if (!boxes[i]->queue.empty()) {
      return absl::InternalError(absl::StrCat(
          boxes[i]->queue.size(), " message(s) from rank ", i / n,
          " to rank ", i % n, " never received"));
    }
  }
  return absl::OkStatus();
}

std::string What(absl::string_view op, int n, DataType dtype, size_t count,
                 bool in_place, absl::string_view extra = "") {
  return absl::StrCat(op, " n=", n, " ", DataTypeName(dtype), " ", extra,
                      " count ", count,
                      in_place ? " in-place" : " out-of-place");
}

// Elements [offset, offset + count) of `rank`'s input for `op`.
std::vector<double> Inputs(ReduceOp op, DataType dtype, int rank, size_t count,
                           size_t offset = 0) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) {
    v[i] = InputValue(op, dtype, rank, offset + i);
  }
  return v;
}

// op over ranks [0, n) of Inputs(op, dtype, r, count, offset), as the
// collectives compute it: avg is the (exact) sum divided in dtype's
// arithmetic (rounded for floats when n is not a power of two).
std::vector<double> Reduced(ReduceOp op, DataType dtype, int n, size_t count,
                            size_t offset = 0) {
  const ReduceOp base = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  std::vector<double> out(count), all(n);
  for (size_t i = 0; i < count; ++i) {
    for (int r = 0; r < n; ++r) all[r] = InputValue(op, dtype, r, offset + i);
    out[i] = ReduceValues(base, dtype, all);
  }
  if (op == ReduceOp::kAvg) {
    std::vector<char> bytes = Encode(dtype, out);
    reduce_internal::DivideInPlace(bytes.data(), count, dtype, n);
    out = Decode(dtype, bytes.data(), count);
  }
  return out;
}

class P2pCollectivesTest : public ::testing::TestWithParam<int> {
 protected:
  static int N() { return GetParam(); }
};

TEST_P(P2pCollectivesTest, AllReduceEveryDtypeAndOp) {
  const int n = N();
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : kCounts) {
        const std::vector<double> expected = Reduced(op, dtype, n, count);
        for (bool in_place : {false, true}) {
          const std::string what =
              What("allreduce", n, dtype, count, in_place, ReduceOpName(op));
          std::vector<std::vector<char>> sends(n), recvs(n);
          for (int r = 0; r < n; ++r) {
            sends[r] = Encode(dtype, Inputs(op, dtype, r, count));
            recvs[r].assign(sends[r].size(), 0x5a);
          }
          const std::vector<std::vector<char>> original = sends;
          absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                                Workspace& ws) {
            const int r = p2p.rank();
            char* out = in_place ? sends[r].data() : recvs[r].data();
            return algorithms::AllReduce(p2p, ws, sends[r].data(), out, count,
                                         dtype, op);
          });
          ASSERT_TRUE(status.ok()) << what << ": " << status;
          const auto& outs = in_place ? sends : recvs;
          for (int r = 0; r < n; ++r) {
            status = CheckEqual(absl::StrCat(what, " rank ", r), expected,
                                Decode(dtype, outs[r].data(), count));
            ASSERT_TRUE(status.ok()) << status;
            ASSERT_TRUE(outs[r] == outs[0]) << what << ": rank " << r
                                            << "'s bytes differ from rank 0's";
            if (!in_place) {
              ASSERT_TRUE(sends[r] == original[r])
                  << what << ": rank " << r << "'s send buffer changed";
            }
          }
        }
      }
    }
  }
}

// Inputs whose sums and products round (random floats): every rank still
// ends with the same bits, on both paths.
TEST_P(P2pCollectivesTest, AllReduceIdenticalBitsOnEveryRank) {
  const int n = N();
  std::mt19937 gen(1234 + n);
  std::uniform_real_distribution<double> dist(-3.0, 3.0);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64,
                         DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : {size_t{1031}, kLargeCount}) {
        const std::string what =
            What("allreduce", n, dtype, count, false, ReduceOpName(op));
        std::vector<std::vector<char>> sends(n), recvs(n);
        for (int r = 0; r < n; ++r) {
          std::vector<double> v(count);
          for (double& x : v) x = dist(gen);
          sends[r] = Encode(dtype, v);
          recvs[r].assign(sends[r].size(), 0);
        }
        absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                              Workspace& ws) {
          const int r = p2p.rank();
          return algorithms::AllReduce(p2p, ws, sends[r].data(),
                                       recvs[r].data(), count, dtype, op);
        });
        ASSERT_TRUE(status.ok()) << what << ": " << status;
        for (int r = 1; r < n; ++r) {
          ASSERT_EQ(std::memcmp(recvs[r].data(), recvs[0].data(),
                                recvs[0].size()),
                    0)
              << what << ": rank " << r << "'s bytes differ from rank 0's";
        }
      }
    }
  }
}

// The pipelined ring at the edges of its pieces: pieces of one element, of
// a few elements (a byte count that is not a multiple of the element's
// size), blocks one element shorter or longer than a multiple of the piece,
// blocks that differ by one element; every dtype, sum and max (the ring
// moves the same pieces for every op), in place and out of place.
TEST_P(P2pCollectivesTest, RingAllReducePieceEdges) {
  const int n = N();
  for (size_t chunk_bytes : {size_t{1}, size_t{17}}) {
    for (DataType dtype : kAllDataTypes) {
      const size_t piece =
          std::max<size_t>(1, chunk_bytes / DataTypeSize(dtype));
      std::vector<size_t> counts = {static_cast<size_t>(n),
                                    static_cast<size_t>(n) + 1};
      for (size_t per_block : {3 * piece - 1, 3 * piece, 3 * piece + 1}) {
        counts.push_back(per_block * n);
        counts.push_back(per_block * n + n - 1);
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (size_t count : counts) {
          const std::vector<double> expected = Reduced(op, dtype, n, count);
          for (bool in_place : {false, true}) {
            const std::string what = What(
                "ring allreduce", n, dtype, count, in_place,
                absl::StrCat(ReduceOpName(op), " chunk_bytes ", chunk_bytes));
            std::vector<std::vector<char>> sends(n), recvs(n);
            for (int r = 0; r < n; ++r) {
              sends[r] = Encode(dtype, Inputs(op, dtype, r, count));
              recvs[r].assign(sends[r].size(), 0x5a);
            }
            const std::vector<std::vector<char>> original = sends;
            absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                                  Workspace& ws) {
              const int r = p2p.rank();
              char* out = in_place ? sends[r].data() : recvs[r].data();
              return algorithms::RingAllReduce(p2p, ws, sends[r].data(), out,
                                               count, dtype, op, chunk_bytes);
            });
            ASSERT_TRUE(status.ok()) << what << ": " << status;
            const auto& outs = in_place ? sends : recvs;
            for (int r = 0; r < n; ++r) {
              status = CheckEqual(absl::StrCat(what, " rank ", r), expected,
                                  Decode(dtype, outs[r].data(), count));
              ASSERT_TRUE(status.ok()) << status;
              ASSERT_TRUE(outs[r] == outs[0])
                  << what << ": rank " << r << "'s bytes differ from rank 0's";
              if (!in_place) {
                ASSERT_TRUE(sends[r] == original[r])
                    << what << ": rank " << r << "'s send buffer changed";
              }
            }
          }
        }
      }
    }
  }
}

// chunk_bytes 0, or fewer elements than members: InvalidArgument on every
// rank, and no message sent (RunRanks finds none left over).
TEST_P(P2pCollectivesTest, RingAllReduceRefusesBadArguments) {
  const int n = N();
  std::vector<std::vector<float>> bufs(n, std::vector<float>(n, 1.0f));
  for (const std::pair<size_t, size_t>& bad :
       {std::pair<size_t, size_t>{static_cast<size_t>(n), 0},
        std::pair<size_t, size_t>{static_cast<size_t>(n) - 1, 4}}) {
    std::vector<absl::Status> got(n);
    absl::Status status = RunRanks(n, [&](PointToPoint& p2p, Workspace& ws) {
      float* buf = bufs[p2p.rank()].data();
      got[p2p.rank()] = algorithms::RingAllReduce(
          p2p, ws, buf, buf, bad.first, DataType::kFloat32, ReduceOp::kSum,
          bad.second);
      return absl::OkStatus();
    });
    ASSERT_TRUE(status.ok()) << status;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(got[r].code(), absl::StatusCode::kInvalidArgument)
          << "count " << bad.first << " chunk_bytes " << bad.second << ": "
          << got[r];
    }
  }
}

// send = buf[shift_send, ...), recv = buf[shift_recv, ...): recv gets the sum
// of every rank's send as it was before the call.
TEST_P(P2pCollectivesTest, AllReduceOverlappingBuffers) {
  const int n = N();
  for (size_t count : {size_t{6}, kLargeCount}) {
    for (const std::pair<int, int>& shifts : {std::pair<int, int>{0, 2},
                                              std::pair<int, int>{2, 0}}) {
      const int shift_send = shifts.first;
      const int shift_recv = shifts.second;
      std::vector<std::vector<int32_t>> bufs(n);
      for (int r = 0; r < n; ++r) {
        bufs[r].assign(count + 2, -7);
        for (size_t i = 0; i < count; ++i) {
          bufs[r][shift_send + i] = (r + 1) * static_cast<int32_t>(i % 97 + 1);
        }
      }
      absl::Status status = RunRanks(n, [&](PointToPoint& p2p, Workspace& ws) {
        int32_t* buf = bufs[p2p.rank()].data();
        return algorithms::AllReduce(p2p, ws, buf + shift_send,
                                     buf + shift_recv, count, DataType::kInt32,
                                     ReduceOp::kSum);
      });
      ASSERT_TRUE(status.ok()) << status;
      const int32_t ranks_sum = n * (n + 1) / 2;
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(bufs[r][shift_recv + i],
                    ranks_sum * static_cast<int32_t>(i % 97 + 1))
              << "n=" << n << " count " << count << " rank " << r << " [" << i
              << "] send at +" << shift_send << ", recv at +" << shift_recv;
        }
      }
    }
  }
}

TEST_P(P2pCollectivesTest, AllGatherEveryDtype) {
  const int n = N();
  const ReduceOp op = ReduceOp::kSum;  // only picks InputValue's values
  for (DataType dtype : kAllDataTypes) {
    const size_t es = DataTypeSize(dtype);
    for (size_t count : kCounts) {
      std::vector<double> expected;
      for (int r = 0; r < n; ++r) {
        const std::vector<double> in = Inputs(op, dtype, r, count);
        expected.insert(expected.end(), in.begin(), in.end());
      }
      for (bool in_place : {false, true}) {
        const std::string what = What("allgather", n, dtype, count, in_place);
        std::vector<std::vector<char>> sends(n), recvs(n);
        for (int r = 0; r < n; ++r) {
          sends[r] = Encode(dtype, Inputs(op, dtype, r, count));
          recvs[r].assign(n * count * es, 0x5a);
          if (in_place) {
            std::copy(sends[r].begin(), sends[r].end(),
                      recvs[r].begin() + r * count * es);
          }
        }
        const std::vector<std::vector<char>> original = sends;
        absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                              Workspace& ws) {
          const int r = p2p.rank();
          const char* send =
              in_place ? recvs[r].data() + r * count * es : sends[r].data();
          return algorithms::AllGather(p2p, ws, send, recvs[r].data(), count,
                                       dtype);
        });
        ASSERT_TRUE(status.ok()) << what << ": " << status;
        for (int r = 0; r < n; ++r) {
          status = CheckEqual(absl::StrCat(what, " rank ", r), expected,
                              Decode(dtype, recvs[r].data(), n * count));
          ASSERT_TRUE(status.ok()) << status;
          ASSERT_TRUE(sends[r] == original[r])
              << what << ": rank " << r << "'s send buffer changed";
        }
      }
    }
  }
}

TEST_P(P2pCollectivesTest, ReduceScatterEveryDtypeAndOp) {
  const int n = N();
  for (DataType dtype : kAllDataTypes) {
    const size_t es = DataTypeSize(dtype);
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : kCounts) {
        // The large count with two ops per dtype only: the ring is the same
        // for every op, and the expected values are the test's cost.
        if (count == kLargeCount && op != ReduceOp::kSum &&
            op != ReduceOp::kAvg) {
          continue;
        }
        const std::vector<double> expected = Reduced(op, dtype, n, n * count);
        for (bool in_place : {false, true}) {
          const std::string what = What("reduce_scatter", n, dtype, count,
                                        in_place, ReduceOpName(op));
          std::vector<std::vector<char>> sends(n), recvs(n);
          for (int r = 0; r < n; ++r) {
            sends[r] = Encode(dtype, Inputs(op, dtype, r, n * count));
            recvs[r].assign(count * es, 0x5a);
          }
          const std::vector<std::vector<char>> original = sends;
          absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                                Workspace& ws) {
            const int r = p2p.rank();
            char* out =
                in_place ? sends[r].data() + r * count * es : recvs[r].data();
            return algorithms::ReduceScatter(p2p, ws, sends[r].data(), out,
                                             count, dtype, op);
          });
          ASSERT_TRUE(status.ok()) << what << ": " << status;
          for (int r = 0; r < n; ++r) {
            const char* out =
                in_place ? sends[r].data() + r * count * es : recvs[r].data();
            const std::vector<double> want(
                expected.begin() + r * count,
                expected.begin() + (r + 1) * count);
            status = CheckEqual(absl::StrCat(what, " rank ", r), want,
                                Decode(dtype, out, count));
            ASSERT_TRUE(status.ok()) << status;
            if (!in_place) {
              ASSERT_TRUE(sends[r] == original[r])
                  << what << ": rank " << r << "'s send buffer changed";
            }
          }
        }
      }
    }
  }
}

TEST_P(P2pCollectivesTest, BroadcastEveryDtypeAndRoot) {
  const int n = N();
  for (DataType dtype : kAllDataTypes) {
    for (size_t count : kCounts) {
      for (int root = 0; root < n; ++root) {
        const std::vector<double> expected =
            Inputs(ReduceOp::kSum, dtype, root, count);
        for (bool in_place : {false, true}) {
          const std::string what =
              What("broadcast", n, dtype, count, in_place,
                   absl::StrCat("root ", root));
          std::vector<std::vector<char>> sends(n), recvs(n);
          for (int r = 0; r < n; ++r) {
            // Non-roots' send buffers hold their own values: never read.
            sends[r] = Encode(dtype, Inputs(ReduceOp::kSum, dtype, r, count));
            recvs[r].assign(sends[r].size(), 0x5a);
          }
          const std::vector<std::vector<char>> original = sends;
          absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                                Workspace& ws) {
            const int r = p2p.rank();
            char* out = in_place ? sends[r].data() : recvs[r].data();
            return algorithms::Broadcast(p2p, ws, sends[r].data(), out, count,
                                         dtype, root);
          });
          ASSERT_TRUE(status.ok()) << what << ": " << status;
          for (int r = 0; r < n; ++r) {
            const auto& out = in_place ? sends[r] : recvs[r];
            status = CheckEqual(absl::StrCat(what, " rank ", r), expected,
                                Decode(dtype, out.data(), count));
            ASSERT_TRUE(status.ok()) << status;
            if (!in_place) {
              ASSERT_TRUE(sends[r] == original[r])
                  << what << ": rank " << r << "'s send buffer changed";
            }
          }
        }
      }
    }
  }
}

TEST_P(P2pCollectivesTest, AllToAllEveryDtype) {
  const int n = N();
  const ReduceOp op = ReduceOp::kSum;  // only picks InputValue's values
  for (DataType dtype : kAllDataTypes) {
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        const std::string what = What("alltoall", n, dtype, count, in_place);
        // Rank r's block j (for rank j) is Inputs(r, j * count, ...).
        std::vector<std::vector<char>> sends(n), recvs(n);
        for (int r = 0; r < n; ++r) {
          sends[r] = Encode(dtype, Inputs(op, dtype, r, n * count));
          recvs[r].assign(sends[r].size(), 0x5a);
        }
        const std::vector<std::vector<char>> original = sends;
        absl::Status status = RunRanks(n, [&](PointToPoint& p2p,
                                              Workspace& ws) {
          const int r = p2p.rank();
          char* out = in_place ? sends[r].data() : recvs[r].data();
          return algorithms::AllToAll(p2p, ws, sends[r].data(), out, count,
                                      dtype);
        });
        ASSERT_TRUE(status.ok()) << what << ": " << status;
        for (int r = 0; r < n; ++r) {
          std::vector<double> expected;
          for (int from = 0; from < n; ++from) {
            const std::vector<double> block =
                Inputs(op, dtype, from, count, r * count);
            expected.insert(expected.end(), block.begin(), block.end());
          }
          const auto& out = in_place ? sends[r] : recvs[r];
          status = CheckEqual(absl::StrCat(what, " rank ", r), expected,
                              Decode(dtype, out.data(), n * count));
          ASSERT_TRUE(status.ok()) << status;
          if (!in_place) {
            ASSERT_TRUE(sends[r] == original[r])
                << what << ": rank " << r << "'s send buffer changed";
          }
        }
      }
    }
  }
}

// AllGather, ReduceScatter, AllToAll and the broadcast root with send and
// recv overlapping partially: the results are those of disjoint buffers.
TEST_P(P2pCollectivesTest, OtherCollectivesOverlappingBuffers) {
  const int n = N();
  const size_t count = 13;
  const size_t total = n * count;
  auto value = [](int rank, size_t i) {
    return static_cast<int32_t>(rank * 1000 + i);
  };
  for (int shift : {1, -1}) {
    // All-gather: send starts `shift` elements off this rank's block.
    std::vector<std::vector<int32_t>> bufs(n);
    for (int r = 0; r < n; ++r) {
      bufs[r].assign(total + 2 * count, -7);
      for (size_t i = 0; i < count; ++i) {
        bufs[r][count + r * count + shift + i] = value(r, i);
      }
    }
    absl::Status status = RunRanks(n, [&](PointToPoint& p2p, Workspace& ws) {
      const int r = p2p.rank();
      int32_t* recv = bufs[r].data() + count;
      return algorithms::AllGather(p2p, ws, recv + r * count + shift, recv,
                                   count, DataType::kInt32);
    });
    ASSERT_TRUE(status.ok()) << status;
    for (int r = 0; r < n; ++r) {
      for (int from = 0; from < n; ++from) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(bufs[r][count + from * count + i], value(from, i))
              << "allgather n=" << n << " shift " << shift << " rank " << r;
        }
      }
    }

    // Reduce-scatter: recv starts `shift` elements off this rank's block.
    for (int r = 0; r < n; ++r) {
      bufs[r].assign(total + 2 * count, -7);
      for (size_t i = 0; i < total; ++i) bufs[r][count + i] = value(r, i);
    }
    status = RunRanks(n, [&](PointToPoint& p2p, Workspace& ws) {
      const int r = p2p.rank();
      int32_t* send = bufs[r].data() + count;
      return algorithms::ReduceScatter(p2p, ws, send, send + r * count + shift,
                                       count, DataType::kInt32, ReduceOp::kSum);
    });
    ASSERT_TRUE(status.ok()) << status;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (int from = 0; from < n; ++from) want += value(from, r * count + i);
        ASSERT_EQ(bufs[r][count + r * count + shift + i], want)
            << "reduce_scatter n=" << n << " shift " << shift << " rank " << r;
      }
    }

    // All-to-all: recv = send + shift elements.
    for (int r = 0; r < n; ++r) {
      bufs[r].assign(total + 2 * count, -7);
      for (size_t i = 0; i < total; ++i) bufs[r][count + i] = value(r, i);
    }
    status = RunRanks(n, [&](PointToPoint& p2p, Workspace& ws) {
      int32_t* send = bufs[p2p.rank()].data() + count;
      return algorithms::AllToAll(p2p, ws, send, send + shift, count,
                                  DataType::kInt32);
    });
    ASSERT_TRUE(status.ok()) << status;
    for (int r = 0; r < n; ++r) {
      for (int from = 0; from < n; ++from) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(bufs[r][count + shift + from * count + i],
                    value(from, r * count + i))
              << "alltoall n=" << n << " shift " << shift << " rank " << r;
        }
      }
    }

    // Broadcast: the root's recv = send + shift elements.
    const int root = n - 1;
    for (int r = 0; r < n; ++r) {
      bufs[r].assign(3 * count, -7);
      for (size_t i = 0; i < count; ++i) bufs[r][count + i] = value(r, i);
    }
    status = RunRanks(n, [&](PointToPoint& p2p, Workspace& ws) {
      int32_t* send = bufs[p2p.rank()].data() + count;
      return algorithms::Broadcast(p2p, ws, send, send + shift, count,
                                   DataType::kInt32, root);
    });
    ASSERT_TRUE(status.ok()) << status;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(bufs[r][count + shift + i], value(root, i))
            << "broadcast n=" << n << " shift " << shift << " rank " << r;
      }
    }
  }
}

// Nobody leaves a barrier before everybody entered it.
TEST_P(P2pCollectivesTest, BarrierWaitsForEveryRank) {
  const int n = N();
  std::atomic<int> entered{0};
  absl::Status status = RunRanks(n, [&](PointToPoint& p2p, Workspace&) {
    for (int round = 1; round <= 3; ++round) {
      // Late arrivals: rank r waits r milliseconds.
      std::this_thread::sleep_for(std::chrono::milliseconds(p2p.rank()));
      entered.fetch_add(1);
      if (absl::Status s = algorithms::Barrier(p2p); !s.ok()) return s;
      if (entered.load() < round * n) {
        return absl::InternalError(absl::StrCat("left barrier ", round,
                                                " with ", entered.load(),
                                                " entries"));
      }
      if (absl::Status s = algorithms::Barrier(p2p); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

int CeilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// The exchanges and sends each algorithm posts per rank.
TEST_P(P2pCollectivesTest, MessageCounts) {
  const int n = N();
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  std::vector<float> send(n * kLargeCount, 1.0f), recv(n * kLargeCount);
  std::vector<RankStats> stats;
  auto run = [&](const std::function<absl::Status(PointToPoint&, Workspace&,
                                                  float*, float*)>& call) {
    std::vector<std::vector<float>> sends(n, send), recvs(n, recv);
    absl::Status status = RunRanks(
        n,
        [&](PointToPoint& p2p, Workspace& ws) {
          return call(p2p, ws, sends[p2p.rank()].data(),
                      recvs[p2p.rank()].data());
        },
        &stats);
    ASSERT_TRUE(status.ok()) << status;
  };
  const DataType f32 = DataType::kFloat32;

  // Count 0: no message at all.
  run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
    absl::Status st = algorithms::AllReduce(p2p, ws, s, r, 0, f32,
                                            ReduceOp::kSum);
    if (st.ok()) st = algorithms::AllGather(p2p, ws, s, r, 0, f32);
    if (st.ok()) st = algorithms::ReduceScatter(p2p, ws, s, r, 0, f32,
                                                ReduceOp::kSum);
    if (st.ok()) st = algorithms::Broadcast(p2p, ws, s, r, 0, f32, 0);
    if (st.ok()) st = algorithms::AllToAll(p2p, ws, s, r, 0, f32);
    return st;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(stats[r].exchanges, 0) << r;

  // All-reduce, small: log2(p2) exchanges, 2 more where the fold touches.
  run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
    return algorithms::AllReduce(p2p, ws, s, r, 13, f32, ReduceOp::kSum);
  });
  for (int r = 0; r < n; ++r) {
    const int want = r >= p2 ? 2 : CeilLog2(p2) + (r + p2 < n ? 2 : 0);
    EXPECT_EQ(stats[r].exchanges, want)
        << "allreduce small n=" << n << " rank " << r;
    EXPECT_EQ(stats[r].sends, r >= p2 ? 1 : want - (r + p2 < n ? 1 : 0));
  }

  // All-reduce, ring: 2 (n - 1) steps, each block in pieces of
  // kP2pPipelineChunkBytes (kLargeCount floats: the same number of pieces
  // in every block for the sizes tested), posted: no exchange.
  run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
    return algorithms::AllReduce(p2p, ws, s, r, kLargeCount, f32,
                                 ReduceOp::kSum);
  });
  const size_t piece = algorithms::kP2pPipelineChunkBytes / sizeof(float);
  const size_t block = (kLargeCount + n - 1) / n;
  const int pieces = static_cast<int>((block + piece - 1) / piece);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(stats[r].exchanges, 0) << "allreduce ring rank " << r;
    EXPECT_EQ(stats[r].sends, 2 * (n - 1) * pieces);
    EXPECT_EQ(stats[r].posted_recvs, 2 * (n - 1) * pieces);
  }

  // All-gather, reduce-scatter, all-to-all: n - 1 steps.
  run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
    return algorithms::AllGather(p2p, ws, s, r, 13, f32);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(stats[r].exchanges, n - 1);
  run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
    return algorithms::ReduceScatter(p2p, ws, s, r, 13, f32, ReduceOp::kSum);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(stats[r].exchanges, n - 1);
  run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
    return algorithms::AllToAll(p2p, ws, s, r, 13, f32);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(stats[r].exchanges, n - 1);

  // Broadcast: n - 1 messages in all; the root sends ceil(log2 n) in one
  // exchange; the others receive once and forward in at most one exchange.
  for (int root = 0; root < n; ++root) {
    run([&](PointToPoint& p2p, Workspace& ws, float* s, float* r) {
      return algorithms::Broadcast(p2p, ws, s, r, 13, f32, root);
    });
    int sends = 0;
    for (int r = 0; r < n; ++r) {
      sends += stats[r].sends;
      EXPECT_LE(stats[r].exchanges, r == root ? 1 : 2);
    }
    EXPECT_EQ(sends, n - 1) << "broadcast root " << root;
    EXPECT_EQ(stats[root].sends, CeilLog2(n));
  }

  // Barrier: ceil(log2 n) rounds.
  run([&](PointToPoint& p2p, Workspace&, float*, float*) {
    return algorithms::Barrier(p2p);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(stats[r].exchanges, CeilLog2(n));
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, P2pCollectivesTest,
                         ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("n", info.param);
                         });

TEST(WorkspaceTest, AlignedAndGrowOnly) {
  Workspace ws;
  void* big = ws.Get(1 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  std::memset(big, 1, 1 << 20);  // all of it is usable
  EXPECT_EQ(ws.Get(10), big);    // smaller: the same memory
  EXPECT_EQ(ws.Get(1 << 20), big);
  void* bigger = ws.Get(3 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bigger) % 64, 0u);
  std::memset(bigger, 2, 3 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ws.Get(0)) % 64, 0u);
}

}  // namespace
}  // namespace devmesh
