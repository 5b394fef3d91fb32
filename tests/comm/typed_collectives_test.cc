// devmesh/tests/comm/typed_collectives_test.cc
// The typed collectives (comm/typed_collectives.h): the DataType deduced for
// each element type, the counts and pointers handed to the void* forms, the
// length checks with their exact messages (on a recording Communicator), and
// real Gloo groups of 2, 3 and 4 processes where the typed forms give the
// exact expected values and the same bytes as the void* forms, and the typed
// forms called through each backend's own class (GlooCommunicator&,
// ShmCommunicator&, a Communicator subclass of the test's own).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/float16.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/reduce_functions.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "gtest/gtest.h"
#include "store/prefix_store.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

// ---- DataType deduction ----------------------------------------------------

static_assert(DataTypeOf<float>::value == DataType::kFloat32);
static_assert(DataTypeOf<double>::value == DataType::kFloat64);
static_assert(DataTypeOf<Float16>::value == DataType::kFloat16);
static_assert(DataTypeOf<BFloat16>::value == DataType::kBFloat16);
static_assert(DataTypeOf<int8_t>::value == DataType::kInt8);
static_assert(DataTypeOf<uint8_t>::value == DataType::kUInt8);
static_assert(DataTypeOf<int32_t>::value == DataType::kInt32);
static_assert(DataTypeOf<int64_t>::value == DataType::kInt64);
// No DataType: their typed collectives do not compile
// (tests/comm/typed_collectives_nocompile_test.sh).
static_assert(!DataTypeOf<char>::known);
static_assert(!DataTypeOf<uint16_t>::known);
static_assert(!DataTypeOf<int16_t>::known);
static_assert(!DataTypeOf<bool>::known);
static_assert(!DataTypeOf<long double>::known);

// ---- A Communicator that records the void* call ----------------------------

struct Call {
  std::string op;  // "" when nothing was called
  const void* send = nullptr;
  const void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce = ReduceOp::kSum;
  int root_or_peer = -1;
};

class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(int rank, int size)
      : rank_(rank), size_(size), global_(size) {}

  absl::string_view backend() const override { return "recording"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& global_ranks() const override { return global_; }

 protected:
  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override {
    return Record({"AllReduce", send, recv, count, dtype, op, -1});
  }
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override {
    return Record({"AllGather", send, recv, count, dtype, ReduceOp::kSum, -1});
  }
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override {
    return Record({"ReduceScatter", send, recv, count, dtype, op, -1});
  }
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override {
    return Record({"Broadcast", send, recv, count, dtype, ReduceOp::kSum,
                   root});
  }
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override {
    return Record({"AllToAll", send, recv, count, dtype, ReduceOp::kSum, -1});
  }
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override {
    return Record({"Send", buf, nullptr, count, dtype, ReduceOp::kSum, peer});
  }
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override {
    return Record({"Recv", nullptr, buf, count, dtype, ReduceOp::kSum, peer});
  }
  absl::Status DoBarrier() override { return Record({"Barrier"}); }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int, int, const SplitOptions&) override {
    return absl::UnimplementedError("recording");
  }
  absl::Status DoAbort() override { return absl::OkStatus(); }

 public:
  const Call& last() const { return last_; }

 private:
  absl::Status Record(Call call) {
    last_ = std::move(call);
    return absl::OkStatus();
  }

  int rank_, size_;
  std::vector<int> global_;
  Call last_;
};

template <typename T>
class TypedDeductionTest : public ::testing::Test {};
using AllElementTypes = ::testing::Types<float, double, Float16, BFloat16,
                                         int8_t, uint8_t, int32_t, int64_t>;
TYPED_TEST_SUITE(TypedDeductionTest, AllElementTypes);

// Every typed form hands the void* form the deduced dtype, the spans'
// pointers and the per-rank count.
TYPED_TEST(TypedDeductionTest, EveryFormForwardsDtypeCountAndPointers) {
  using T = TypeParam;
  constexpr DataType kWant = DataTypeOf<T>::value;
  RecordingCommunicator fake(/*rank=*/1, /*size=*/4);
  Communicator& comm = fake;
  std::vector<T> a(12), b(12), c(3);

  ASSERT_TRUE(comm.AllReduce(a, absl::MakeSpan(b), ReduceOp::kMax).ok());
  Call got = fake.last();
  EXPECT_EQ(got.op, "AllReduce");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 12u);
  EXPECT_EQ(got.send, a.data());
  EXPECT_EQ(got.recv, b.data());
  EXPECT_EQ(got.reduce, ReduceOp::kMax);

  ASSERT_TRUE(comm.AllReduce(absl::MakeSpan(a), ReduceOp::kAvg).ok());
  got = fake.last();
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 12u);
  EXPECT_EQ(got.send, a.data());
  EXPECT_EQ(got.recv, a.data());
  EXPECT_EQ(got.reduce, ReduceOp::kAvg);

  ASSERT_TRUE(comm.AllGather(c, absl::MakeSpan(a)).ok());
  got = fake.last();
  EXPECT_EQ(got.op, "AllGather");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 3u);  // per rank: send's length
  EXPECT_EQ(got.send, c.data());
  EXPECT_EQ(got.recv, a.data());

  ASSERT_TRUE(comm.ReduceScatter(a, absl::MakeSpan(c), ReduceOp::kProd).ok());
  got = fake.last();
  EXPECT_EQ(got.op, "ReduceScatter");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 3u);  // per rank: recv's length
  EXPECT_EQ(got.send, a.data());
  EXPECT_EQ(got.recv, c.data());
  EXPECT_EQ(got.reduce, ReduceOp::kProd);

  ASSERT_TRUE(comm.AllToAll(a, absl::MakeSpan(b)).ok());
  got = fake.last();
  EXPECT_EQ(got.op, "AllToAll");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 3u);  // per block: 12 / size()
  EXPECT_EQ(got.send, a.data());
  EXPECT_EQ(got.recv, b.data());

  // Rank 1 is the root: send is read.
  ASSERT_TRUE(comm.Broadcast(a, absl::MakeSpan(b), /*root=*/1).ok());
  got = fake.last();
  EXPECT_EQ(got.op, "Broadcast");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 12u);
  EXPECT_EQ(got.send, a.data());
  EXPECT_EQ(got.recv, b.data());
  EXPECT_EQ(got.root_or_peer, 1);
  // Not the root: send may be empty; recv stands in for it.
  ASSERT_TRUE(comm.Broadcast({}, absl::MakeSpan(b), /*root=*/2).ok());
  got = fake.last();
  EXPECT_EQ(got.count, 12u);
  EXPECT_EQ(got.send, b.data());
  EXPECT_EQ(got.root_or_peer, 2);
  ASSERT_TRUE(comm.Broadcast(absl::MakeSpan(c), /*root=*/0).ok());
  got = fake.last();
  EXPECT_EQ(got.count, 3u);
  EXPECT_EQ(got.send, c.data());
  EXPECT_EQ(got.recv, c.data());

  // Send takes a const or a mutable span; Recv a mutable one.
  ASSERT_TRUE(comm.Send(absl::MakeConstSpan(c), /*peer=*/3).ok());
  got = fake.last();
  EXPECT_EQ(got.op, "Send");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 3u);
  EXPECT_EQ(got.send, c.data());
  EXPECT_EQ(got.root_or_peer, 3);
  ASSERT_TRUE(comm.Send(absl::MakeSpan(a), /*peer=*/0).ok());
  got = fake.last();
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 12u);
  EXPECT_EQ(got.send, a.data());
  EXPECT_EQ(got.root_or_peer, 0);
  ASSERT_TRUE(comm.Recv(absl::MakeSpan(b), /*peer=*/2).ok());
  got = fake.last();
  EXPECT_EQ(got.op, "Recv");
  EXPECT_EQ(got.dtype, kWant);
  EXPECT_EQ(got.count, 12u);
  EXPECT_EQ(got.recv, b.data());
  EXPECT_EQ(got.root_or_peer, 2);
}

// ---- Length checks: exact messages, and nothing is called ------------------

// The error of `status`, checking that the fake was not called.
std::string Rejected(const RecordingCommunicator& fake, absl::Status status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(fake.last().op, "") << "the void* form was called";
  return std::string(status.message());
}

TEST(TypedLengthTest, AllReduceSendAndRecvDiffer) {
  RecordingCommunicator fake(0, 4);
  Communicator& comm = fake;
  std::vector<float> send(3), recv(4);
  EXPECT_EQ(Rejected(fake, comm.AllReduce(send, absl::MakeSpan(recv),
                                          ReduceOp::kSum)),
            "AllReduce: send has 3 float32 elements and recv has 4; they "
            "must be the same length");
}

TEST(TypedLengthTest, AllGatherRecvNotSizeTimesSend) {
  RecordingCommunicator fake(0, 4);
  Communicator& comm = fake;
  std::vector<int32_t> send(2), recv(6);
  EXPECT_EQ(Rejected(fake, comm.AllGather(send, absl::MakeSpan(recv))),
            "AllGather: recv has 6 int32 elements and send has 2; recv must "
            "have size() x send = 4 x 2 = 8");
  // recv equal to send (a common slip: forgetting the size() factor).
  std::vector<int32_t> same(2);
  EXPECT_EQ(Rejected(fake, comm.AllGather(send, absl::MakeSpan(same))),
            "AllGather: recv has 2 int32 elements and send has 2; recv must "
            "have size() x send = 4 x 2 = 8");
}

TEST(TypedLengthTest, ReduceScatterSendNotSizeTimesRecv) {
  RecordingCommunicator fake(0, 4);
  Communicator& comm = fake;
  std::vector<double> send(6), recv(2);
  EXPECT_EQ(Rejected(fake, comm.ReduceScatter(send, absl::MakeSpan(recv),
                                              ReduceOp::kSum)),
            "ReduceScatter: send has 6 float64 elements and recv has 2; send "
            "must have size() x recv = 4 x 2 = 8");
}

TEST(TypedLengthTest, BroadcastChecksLengthsOnTheRootOnly) {
  RecordingCommunicator fake(/*rank=*/2, 4);
  Communicator& comm = fake;
  std::vector<uint8_t> send(3), recv(4);
  EXPECT_EQ(Rejected(fake, comm.Broadcast(send, absl::MakeSpan(recv),
                                          /*root=*/2)),
            "Broadcast: send has 3 uint8 elements and recv has 4; they must "
            "be the same length on the root");
  // On another rank send is not read, so its length does not matter.
  EXPECT_TRUE(comm.Broadcast(send, absl::MakeSpan(recv), /*root=*/0).ok());
  EXPECT_EQ(fake.last().count, 4u);
}

TEST(TypedLengthTest, AllToAllLengthsDifferOrNotAMultipleOfSize) {
  RecordingCommunicator fake(0, 4);
  Communicator& comm = fake;
  std::vector<int64_t> eight(8), six(6), six_too(6);
  EXPECT_EQ(Rejected(fake, comm.AllToAll(eight, absl::MakeSpan(six))),
            "AllToAll: send has 8 int64 elements and recv has 6; they must "
            "be the same length, a multiple of size() = 4");
  EXPECT_EQ(Rejected(fake, comm.AllToAll(six, absl::MakeSpan(six_too))),
            "AllToAll: send has 6 int64 elements and recv has 6; they must "
            "be the same length, a multiple of size() = 4");
}

TEST(TypedLengthTest, HalfTypesNameTheirDtype) {
  RecordingCommunicator fake(0, 2);
  Communicator& comm = fake;
  std::vector<Float16> h(3), h2(5);
  std::vector<BFloat16> b(1), b2(1);
  EXPECT_EQ(Rejected(fake, comm.AllReduce(h, absl::MakeSpan(h2),
                                          ReduceOp::kSum)),
            "AllReduce: send has 3 float16 elements and recv has 5; they "
            "must be the same length");
  EXPECT_EQ(Rejected(fake, comm.AllGather(b, absl::MakeSpan(b2))),
            "AllGather: recv has 1 bfloat16 elements and send has 1; recv "
            "must have size() x send = 2 x 1 = 2");
}

// ---- Through a derived class ----------------------------------------------

// The front is not virtual: the typed forms (and Split(color,
// key)) are callable through the derived type, not only Communicator&.
TEST(TypedThroughDerivedTest, EveryFormThroughTheSubclassItself) {
  RecordingCommunicator fake(/*rank=*/0, /*size=*/2);
  std::vector<int32_t> a(4), b(4), c(2);
  ASSERT_TRUE(fake.AllReduce(a, absl::MakeSpan(b), ReduceOp::kSum).ok());
  EXPECT_EQ(fake.last().op, "AllReduce");
  EXPECT_EQ(fake.last().dtype, DataType::kInt32);
  EXPECT_EQ(fake.last().count, 4u);
  ASSERT_TRUE(fake.AllReduce(absl::MakeSpan(a), ReduceOp::kMin).ok());
  EXPECT_EQ(fake.last().reduce, ReduceOp::kMin);
  ASSERT_TRUE(fake.AllGather(c, absl::MakeSpan(a)).ok());
  EXPECT_EQ(fake.last().op, "AllGather");
  EXPECT_EQ(fake.last().count, 2u);
  ASSERT_TRUE(fake.ReduceScatter(a, absl::MakeSpan(c), ReduceOp::kMax).ok());
  EXPECT_EQ(fake.last().op, "ReduceScatter");
  EXPECT_EQ(fake.last().count, 2u);
  ASSERT_TRUE(fake.Broadcast(a, absl::MakeSpan(b), /*root=*/0).ok());
  EXPECT_EQ(fake.last().op, "Broadcast");
  ASSERT_TRUE(fake.Broadcast(absl::MakeSpan(b), /*root=*/1).ok());
  EXPECT_EQ(fake.last().root_or_peer, 1);
  ASSERT_TRUE(fake.AllToAll(a, absl::MakeSpan(b)).ok());
  EXPECT_EQ(fake.last().op, "AllToAll");
  ASSERT_TRUE(fake.Send(absl::MakeConstSpan(c), /*peer=*/1).ok());
  EXPECT_EQ(fake.last().op, "Send");
  ASSERT_TRUE(fake.Send(absl::MakeSpan(c), /*peer=*/1).ok());
  EXPECT_EQ(fake.last().count, 2u);
  ASSERT_TRUE(fake.Recv(absl::MakeSpan(c), /*peer=*/1).ok());
  EXPECT_EQ(fake.last().op, "Recv");
  EXPECT_EQ(fake.last().dtype, DataType::kInt32);
  // The length check runs through the subclass too.
  absl::Status bad = fake.AllReduce(c, absl::MakeSpan(b), ReduceOp::kSum);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "AllReduce: send has 2 int32 elements and recv has 4; they must "
            "be the same length");
}

// ---- Real Gloo groups ------------------------------------------------------

absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

#define RETURN_IF_ERROR_T(expr)  \
  do {                           \
    absl::Status _s = (expr);    \
    if (!_s.ok()) return _s;     \
  } while (0)

absl::StatusOr<std::unique_ptr<Communicator>> World(
    int rank, int size, std::shared_ptr<Store> store) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  return CreateCommunicator("gloo", std::move(store), rank, size, options);
}

// Element i of `rank`'s input: (rank + 1) * (i % 5 + 1), at most 4 * 5 = 20,
// so every sum over 4 ranks (at most 10 * 5 = 50) is exact in every type.
int InputOf(int rank, size_t i) {
  return (rank + 1) * static_cast<int>(i % 5 + 1);
}

template <typename T>
T Make(int v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return Float16{reduce_internal::FloatToFloat16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{reduce_internal::FloatToBFloat16(static_cast<float>(v))};
  } else {
    return static_cast<T>(v);
  }
}

// Typed all-reduce sum of `count` elements: the exact expected values, the
// send span unchanged, and the same bytes as the void* form.
template <typename T>
absl::Status TypedAllReduceSum(Communicator& comm, size_t count) {
  const int n = comm.size(), rank = comm.rank();
  const std::string what =
      absl::StrCat("allreduce ", DataTypeName(DataTypeOf<T>::value), " x",
                   count, " on ", n, " ranks");
  std::vector<T> send(count), recv(count), want(count), raw(count);
  for (size_t i = 0; i < count; ++i) {
    send[i] = Make<T>(InputOf(rank, i));
    want[i] = Make<T>(n * (n + 1) / 2 * static_cast<int>(i % 5 + 1));
  }
  const std::vector<T> sent = send;
  RETURN_IF_ERROR_T(comm.AllReduce(send, absl::MakeSpan(recv), ReduceOp::kSum));
  RETURN_IF_ERROR_T(Check(recv == want, what + ": wrong sum"));
  RETURN_IF_ERROR_T(Check(send == sent, what + ": send changed"));
  RETURN_IF_ERROR_T(comm.AllReduce(send.data(), raw.data(), count,
                                   DataTypeOf<T>::value, ReduceOp::kSum));
  RETURN_IF_ERROR_T(Check(
      std::memcmp(raw.data(), recv.data(), count * sizeof(T)) == 0,
      what + ": differs from the void* form"));
  // In place.
  RETURN_IF_ERROR_T(comm.AllReduce(absl::MakeSpan(send), ReduceOp::kSum));
  return Check(send == want, what + " in place: wrong sum");
}

class TypedGlooTest : public ::testing::TestWithParam<int> {};

TEST_P(TypedGlooTest, AllReduceSumEveryType) {
  absl::Status status = ForkRanks(GetParam(), [](int rank, int size,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(rank, size, store);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    for (size_t count : {size_t{1}, size_t{37}, size_t{1031}}) {
      RETURN_IF_ERROR_T(TypedAllReduceSum<float>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<double>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<Float16>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<BFloat16>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<int8_t>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<uint8_t>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<int32_t>(c, count));
      RETURN_IF_ERROR_T(TypedAllReduceSum<int64_t>(c, count));
    }
    // The 16-bit sums checked by their bits too: 1.0 on every rank sums to
    // `size`: float16 2.0 = 0x4000, 3.0 = 0x4200, 4.0 = 0x4400; bfloat16
    // 2.0 = 0x4000, 3.0 = 0x4040, 4.0 = 0x4080.
    std::vector<Float16> h(3, Float16{0x3C00});
    std::vector<BFloat16> b(3, BFloat16{0x3F80});
    RETURN_IF_ERROR_T(c.AllReduce(absl::MakeSpan(h), ReduceOp::kSum));
    RETURN_IF_ERROR_T(c.AllReduce(absl::MakeSpan(b), ReduceOp::kSum));
    const uint16_t half_bits[] = {0, 0x3C00, 0x4000, 0x4200, 0x4400};
    const uint16_t bf_bits[] = {0, 0x3F80, 0x4000, 0x4040, 0x4080};
    RETURN_IF_ERROR_T(Check(h[2].bits == half_bits[size],
                            absl::StrCat("float16 sum bits ", h[2].bits)));
    RETURN_IF_ERROR_T(Check(b[2].bits == bf_bits[size],
                            absl::StrCat("bfloat16 sum bits ", b[2].bits)));
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(TypedGlooTest, GatherScatterBroadcastAllToAllSendRecv) {
  absl::Status status = ForkRanks(GetParam(), [](int rank, int n,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(rank, n, store);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const std::string at = absl::StrCat(" (", n, " ranks)");

    // AllGather of {10 * rank, 10 * rank + 1}.
    std::vector<int64_t> mine = {10 * rank, 10 * rank + 1}, all(2 * n);
    RETURN_IF_ERROR_T(c.AllGather(mine, absl::MakeSpan(all)));
    std::vector<int64_t> want_all;
    for (int r = 0; r < n; ++r) {
      want_all.push_back(10 * r);
      want_all.push_back(10 * r + 1);
    }
    RETURN_IF_ERROR_T(Check(all == want_all, "allgather int64" + at));

    // ReduceScatter sum: send[j] = rank + j; block rank() of the sum is
    // sum_r (r + j) = n(n-1)/2 + n * j for j in [2 rank, 2 rank + 2).
    std::vector<int32_t> scatter_in(2 * n), block(2);
    for (int j = 0; j < 2 * n; ++j) scatter_in[j] = rank + j;
    RETURN_IF_ERROR_T(
        c.ReduceScatter(scatter_in, absl::MakeSpan(block), ReduceOp::kSum));
    const int32_t base = n * (n - 1) / 2;
    RETURN_IF_ERROR_T(Check(
        block == std::vector<int32_t>{base + n * (2 * rank),
                                      base + n * (2 * rank + 1)},
        "reduce_scatter int32" + at));

    // Broadcast from the last rank.
    const int root = n - 1;
    std::vector<double> from_root = {1.5, -2.25, 1e300};
    std::vector<double> got(3, 0.0);
    RETURN_IF_ERROR_T(c.Broadcast(rank == root ? from_root
                                                : std::vector<double>{},
                                  absl::MakeSpan(got), root));
    RETURN_IF_ERROR_T(Check(got == from_root, "broadcast float64" + at));
    std::vector<uint8_t> bytes(4, rank == 0 ? 200 : 0);
    RETURN_IF_ERROR_T(c.Broadcast(absl::MakeSpan(bytes), /*root=*/0));
    RETURN_IF_ERROR_T(Check(bytes == std::vector<uint8_t>(4, 200),
                            "broadcast in place uint8" + at));

    // AllToAll: block j of send is 100 * rank + j; recv block i came from i.
    std::vector<int32_t> a2a_in(n), a2a_out(n);
    for (int j = 0; j < n; ++j) a2a_in[j] = 100 * rank + j;
    RETURN_IF_ERROR_T(c.AllToAll(a2a_in, absl::MakeSpan(a2a_out)));
    for (int i = 0; i < n; ++i) {
      RETURN_IF_ERROR_T(
          Check(a2a_out[i] == 100 * i + rank, "alltoall int32" + at));
    }

    // Send/Recv around a ring: even ranks send first.
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    std::vector<float> out = {static_cast<float>(rank), 0.5f}, in(2, -1.0f);
    if (rank % 2 == 0) {
      RETURN_IF_ERROR_T(c.Send(absl::MakeConstSpan(out), right));
      RETURN_IF_ERROR_T(c.Recv(absl::MakeSpan(in), left));
    } else {
      RETURN_IF_ERROR_T(c.Recv(absl::MakeSpan(in), left));
      RETURN_IF_ERROR_T(c.Send(absl::MakeConstSpan(out), right));
    }
    return Check(in == std::vector<float>{static_cast<float>(left), 0.5f},
                 "send/recv float32" + at);
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A length error is local: every rank gets it at once (nothing was sent),
// and the group still works afterwards.
TEST_P(TypedGlooTest, LengthErrorOnEveryRankLeavesTheGroupUsable) {
  absl::Status status = ForkRanks(GetParam(), [](int rank, int n,
                                                 std::shared_ptr<Store> store) {
    auto comm = World(rank, n, store);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    std::vector<float> send(2), recv(2);
    absl::Status bad = c.AllGather(send, absl::MakeSpan(recv));
    const std::string want = absl::StrCat(
        "AllGather: recv has 2 float32 elements and send has 2; recv must "
        "have size() x send = ",
        n, " x 2 = ", 2 * n);
    RETURN_IF_ERROR_T(Check(bad.code() == absl::StatusCode::kInvalidArgument &&
                                bad.message() == want,
                            "got " + bad.ToString() + ", want " + want));
    std::vector<int32_t> one = {1};
    RETURN_IF_ERROR_T(c.AllReduce(absl::MakeSpan(one), ReduceOp::kSum));
    return Check(one[0] == n, "allreduce after the length error");
  });
  EXPECT_TRUE(status.ok()) << status;
}

// The typed forms through GlooCommunicator& and ShmCommunicator&, the classes
// CreateCommunicator("gloo"/"shm") returns: the exact sums and gathers.
template <typename Backend>
absl::Status TypedThroughBackendClass(Communicator& base,
                                      const std::string& what) {
  auto* backend = dynamic_cast<Backend*>(&base);
  RETURN_IF_ERROR_T(Check(backend != nullptr, what + ": not that class"));
  Backend& c = *backend;
  const int n = c.size(), rank = c.rank();
  std::vector<float> grads = {1.0f * rank, 2.0f};
  RETURN_IF_ERROR_T(c.AllReduce(absl::MakeSpan(grads), ReduceOp::kSum));
  RETURN_IF_ERROR_T(Check(
      grads == std::vector<float>{n * (n - 1) / 2.0f, 2.0f * n},
      what + ": allreduce float32"));
  std::vector<int64_t> mine = {rank}, all(n), want(n);
  for (int r = 0; r < n; ++r) want[r] = r;
  RETURN_IF_ERROR_T(c.AllGather(mine, absl::MakeSpan(all)));
  RETURN_IF_ERROR_T(Check(all == want, what + ": allgather int64"));
  std::vector<double> sum(1);
  RETURN_IF_ERROR_T(c.AllReduce(std::vector<double>{0.5 * (rank + 1)},
                                absl::MakeSpan(sum), ReduceOp::kMax));
  return Check(sum[0] == 0.5 * n, what + ": allreduce max float64");
}

TEST_P(TypedGlooTest, ThroughGlooAndShmCommunicatorClasses) {
  absl::Status status = ForkRanks(GetParam(), [](int rank, int n,
                                                 std::shared_ptr<Store> store) {
    auto gloo = World(rank, n, store);
    if (!gloo.ok()) return gloo.status();
    RETURN_IF_ERROR_T(TypedThroughBackendClass<GlooCommunicator>(
        **gloo, absl::StrCat("GlooCommunicator& (", n, " ranks)")));
    CommOptions options;
    options.timeout = absl::Seconds(60);
    auto shm = CreateCommunicator("shm", std::make_shared<PrefixStore>(
                                             store, "shm"),
                                  rank, n, options);
    if (!shm.ok()) return shm.status();
    return TypedThroughBackendClass<ShmCommunicator>(
        **shm, absl::StrCat("ShmCommunicator& (", n, " ranks)"));
  });
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Ranks, TypedGlooTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("ranks", info.param);
                         });

}  // namespace
}  // namespace devmesh
