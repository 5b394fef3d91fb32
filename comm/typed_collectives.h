// devmesh/comm/typed_collectives.h
// -----------------------------------------------------------------------------
// Typed collectives: Communicator's overloads over absl::Span, declared in
// comm/communicator.h (which includes this header; include either). The
// DataType is deduced from the element type T, and the element counts are
// taken from the spans and checked against each other before anything is
// sent, so that a std::vector<double> cannot be all-reduced as float32:
//
//   std::vector<float> grads(1024, 1.0f);
//   DEVMESH_RETURN_IF_ERROR(comm->AllReduce(absl::MakeSpan(grads),
//                                           devmesh::ReduceOp::kSum));
//
//   std::vector<int64_t> mine = {rank}, all(comm->size());
//   DEVMESH_RETURN_IF_ERROR(comm->AllGather(mine, absl::MakeSpan(all)));
//
// T is one of float (float32), double (float64), int8_t, uint8_t, int32_t,
// int64_t, devmesh::Float16 and devmesh::BFloat16 (comm/float16.h). Any other
// T (char, uint16_t, long long, bool, a struct) does not compile, with a
// static_assert that lists these; for anything else use the void* forms with
// an explicit DataType, as for device pointers on NCCL.
//
// T is deduced from the receive span (recv, or buf), which must be an
// absl::Span<T> (absl::MakeSpan(vector)); the send argument may be anything
// that converts to absl::Span<const T> (a vector, an array, a mutable span).
// Send(buf) deduces T from buf and takes a const or a mutable span.
//
// Spans are host memory on Gloo; on NCCL an absl::Span over device memory
// works the same (the span is only a pointer and a length).
//
// Errors: the count checks below return InvalidArgument naming the collective,
// the dtype and both lengths; they are made on this rank only, before any
// communication. The rejected call still counts as a collective of this
// communicator (CallRecord::seq), so on shared memory the others' call is
// failed by the per-call check (comm/call_check.h) when this rank calls its
// next collective, instead of pairing with it.
// Past the checks, each call is its void* form with the same errors
// (comm/communicator.h).
//
// The typed forms are members of the non-virtual front, so they are called
// the same way through a backend's own class (GlooCommunicator&,
// ShmCommunicator&) as through Communicator&.
//
// Thread-safety: as the void* forms (one collective at a time per
// Communicator).
#ifndef DEVMESH_COMM_TYPED_COLLECTIVES_H_
#define DEVMESH_COMM_TYPED_COLLECTIVES_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/float16.h"

namespace devmesh {

// The DataType of element type T: DataTypeOf<float>::value is kFloat32.
// DataTypeOf<T>::known is false for a T without one; a typed collective over
// such a T fails to compile with a message listing the supported types.
template <typename T>
struct DataTypeOf {
  static constexpr bool known = false;
  static constexpr DataType value = DataType::kFloat32;  // never used
};

#define DEVMESH_INTERNAL_DATA_TYPE_OF(T, dtype) \
  template <>                                   \
  struct DataTypeOf<T> {                        \
    static constexpr bool known = true;         \
    static constexpr DataType value = dtype;    \
  }
DEVMESH_INTERNAL_DATA_TYPE_OF(float, DataType::kFloat32);
DEVMESH_INTERNAL_DATA_TYPE_OF(double, DataType::kFloat64);
DEVMESH_INTERNAL_DATA_TYPE_OF(Float16, DataType::kFloat16);
DEVMESH_INTERNAL_DATA_TYPE_OF(BFloat16, DataType::kBFloat16);
DEVMESH_INTERNAL_DATA_TYPE_OF(int8_t, DataType::kInt8);
DEVMESH_INTERNAL_DATA_TYPE_OF(uint8_t, DataType::kUInt8);
DEVMESH_INTERNAL_DATA_TYPE_OF(int32_t, DataType::kInt32);
DEVMESH_INTERNAL_DATA_TYPE_OF(int64_t, DataType::kInt64);
#undef DEVMESH_INTERNAL_DATA_TYPE_OF

namespace typed_internal {

template <typename T>
constexpr DataType DataTypeFor() {
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>,
                "devmesh: a typed collective's receive span must be mutable: "
                "pass absl::Span<T> (absl::MakeSpan(v)), not "
                "absl::Span<const T>");
  static_assert(DataTypeOf<std::remove_cv_t<T>>::known,
                "devmesh: this element type has no devmesh::DataType; typed "
                "collectives take float, double, int8_t, uint8_t, int32_t, "
                "int64_t, devmesh::Float16 or devmesh::BFloat16 (for other "
                "types use the void* overloads with an explicit DataType)");
  return DataTypeOf<std::remove_cv_t<T>>::value;
}

// "AllReduce: send has 3 float32 elements and recv has 4; "...
inline absl::Status LengthError(absl::string_view op, DataType dtype,
                                absl::string_view a_name, size_t a,
                                absl::string_view b_name, size_t b,
                                absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", a_name, " has ", a, " ", DataTypeName(dtype),
                   " elements and ", b_name, " has ", b, "; ", rule));
}

}  // namespace typed_internal

// All-reduce of send into recv (may be the same memory: in place).
// Errors: InvalidArgument when send.size() != recv.size():
//   "AllReduce: send has 3 float32 elements and recv has 4; they must be the
//   same length"
template <typename T>
absl::Status Communicator::AllReduce(absl::Span<const NoDeduce<T>> send,
                                     absl::Span<T> recv, ReduceOp op) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  if (send.size() != recv.size()) {
    return Rejected(CallKind::kAllReduce, dtype,
                    typed_internal::LengthError(
                        "AllReduce", dtype, "send", send.size(), "recv",
                        recv.size(), "they must be the same length"));
  }
  return AllReduce(send.data(), recv.data(), recv.size(), dtype, op);
}

// In-place all-reduce of buf.
template <typename T>
absl::Status Communicator::AllReduce(absl::Span<T> buf, ReduceOp op) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  return AllReduce(buf.data(), buf.data(), buf.size(), dtype, op);
}

// recv gets every rank's send, rank r's at [r * send.size(), ...).
// Errors: InvalidArgument when recv.size() != size() * send.size():
//   "AllGather: recv has 6 int32 elements and send has 2; recv must have
//   size() x send = 4 x 2 = 8"
template <typename T>
absl::Status Communicator::AllGather(absl::Span<const NoDeduce<T>> send,
                                     absl::Span<T> recv) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  const size_t n = static_cast<size_t>(size());
  if (recv.size() != n * send.size()) {
    return Rejected(
        CallKind::kAllGather, dtype,
        typed_internal::LengthError(
            "AllGather", dtype, "recv", recv.size(), "send", send.size(),
            absl::StrCat("recv must have size() x send = ", n, " x ",
                         send.size(), " = ", n * send.size())));
  }
  return AllGather(send.data(), recv.data(), send.size(), dtype);
}

// recv gets block rank() of the reduction of every rank's send, whose
// blocks are recv.size() long.
// Errors: InvalidArgument when send.size() != size() * recv.size():
//   "ReduceScatter: send has 6 float64 elements and recv has 2; send must
//   have size() x recv = 4 x 2 = 8"
template <typename T>
absl::Status Communicator::ReduceScatter(absl::Span<const NoDeduce<T>> send,
                                         absl::Span<T> recv, ReduceOp op) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  const size_t n = static_cast<size_t>(size());
  if (send.size() != n * recv.size()) {
    return Rejected(
        CallKind::kReduceScatter, dtype,
        typed_internal::LengthError(
            "ReduceScatter", dtype, "send", send.size(), "recv", recv.size(),
            absl::StrCat("send must have size() x recv = ", n, " x ",
                         recv.size(), " = ", n * recv.size())));
  }
  return ReduceScatter(send.data(), recv.data(), recv.size(), dtype, op);
}

// recv gets the root's send on every rank. send is read on the root only
// (other ranks may pass an empty span).
// Errors: InvalidArgument on the root when send.size() != recv.size():
//   "Broadcast: send has 3 uint8 elements and recv has 4; they must be the
//   same length on the root"
template <typename T>
absl::Status Communicator::Broadcast(absl::Span<const NoDeduce<T>> send,
                                     absl::Span<T> recv, int root) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  if (rank() == root && send.size() != recv.size()) {
    return Rejected(
        CallKind::kBroadcast, dtype,
        typed_internal::LengthError("Broadcast", dtype, "send", send.size(),
                                    "recv", recv.size(),
                                    "they must be the same length on the "
                                    "root"));
  }
  return Broadcast(rank() == root ? send.data() : recv.data(), recv.data(),
                   recv.size(), dtype, root);
}

// In-place broadcast: buf is sent on the root and received elsewhere.
template <typename T>
absl::Status Communicator::Broadcast(absl::Span<T> buf, int root) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  return Broadcast(buf.data(), buf.data(), buf.size(), dtype, root);
}

// send and recv hold size() blocks of equal length; block j of send goes to
// rank j, block i of recv comes from rank i.
// Errors: InvalidArgument when the lengths differ:
//   "AllToAll: send has 8 int64 elements and recv has 6; they must be the
//   same length, a multiple of size() = 4"
// or are not a multiple of size():
//   "AllToAll: send has 6 int64 elements and recv has 6; they must be the
//   same length, a multiple of size() = 4"
template <typename T>
absl::Status Communicator::AllToAll(absl::Span<const NoDeduce<T>> send,
                                    absl::Span<T> recv) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  const size_t n = static_cast<size_t>(size());
  if (send.size() != recv.size() || (n > 0 && send.size() % n != 0)) {
    return Rejected(
        CallKind::kAllToAll, dtype,
        typed_internal::LengthError(
            "AllToAll", dtype, "send", send.size(), "recv", recv.size(),
            absl::StrCat(
                "they must be the same length, a multiple of size() = ", n)));
  }
  return AllToAll(send.data(), recv.data(), n > 0 ? send.size() / n : 0,
                  dtype);
}

// Reduction of send to recv on the root. recv is written on the root only
// (other ranks may pass an empty span).
// Errors: InvalidArgument on the root when send.size() != recv.size():
//   "Reduce: send has 3 float32 elements and recv has 4; they must be the
//   same length on the root"
template <typename T>
absl::Status Communicator::Reduce(absl::Span<const NoDeduce<T>> send,
                                  absl::Span<T> recv, ReduceOp op, int root) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  if (rank() == root && send.size() != recv.size()) {
    return Rejected(
        CallKind::kReduce, dtype,
        typed_internal::LengthError("Reduce", dtype, "send", send.size(),
                                    "recv", recv.size(),
                                    "they must be the same length on the "
                                    "root"));
  }
  return Reduce(send.data(), recv.data(), send.size(), dtype, op, root);
}

// recv on the root gets every rank's send, rank r's at [r * send.size(),
// ...); recv is written on the root only (others may pass an empty span).
// Errors: InvalidArgument on the root when recv.size() != size() *
// send.size():
//   "Gather: recv has 6 int32 elements and send has 2; recv must have
//   size() x send = 4 x 2 = 8 on the root"
template <typename T>
absl::Status Communicator::Gather(absl::Span<const NoDeduce<T>> send,
                                  absl::Span<T> recv, int root) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  const size_t n = static_cast<size_t>(size());
  if (rank() == root && recv.size() != n * send.size()) {
    return Rejected(
        CallKind::kGather, dtype,
        typed_internal::LengthError(
            "Gather", dtype, "recv", recv.size(), "send", send.size(),
            absl::StrCat("recv must have size() x send = ", n, " x ",
                         send.size(), " = ", n * send.size(),
                         " on the root")));
  }
  return Gather(send.data(), recv.data(), send.size(), dtype, root);
}

// recv on every rank r gets block r of the root's send, whose blocks are
// recv.size() long; send is read on the root only (others may pass an
// empty span).
// Errors: InvalidArgument on the root when send.size() != size() *
// recv.size():
//   "Scatter: send has 6 float64 elements and recv has 2; send must have
//   size() x recv = 4 x 2 = 8 on the root"
template <typename T>
absl::Status Communicator::Scatter(absl::Span<const NoDeduce<T>> send,
                                   absl::Span<T> recv, int root) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  const size_t n = static_cast<size_t>(size());
  if (rank() == root && send.size() != n * recv.size()) {
    return Rejected(
        CallKind::kScatter, dtype,
        typed_internal::LengthError(
            "Scatter", dtype, "send", send.size(), "recv", recv.size(),
            absl::StrCat("send must have size() x recv = ", n, " x ",
                         recv.size(), " = ", n * recv.size(),
                         " on the root")));
  }
  return Scatter(send.data(), recv.data(), recv.size(), dtype, root);
}

// All-to-all with per-peer counts over contiguous blocks: send holds the
// blocks for group ranks 0, 1, ... back to back (send_counts[j] elements
// for rank j), and recv gets those from ranks 0, 1, ... back to back
// (recv_counts[i] from rank i); PyTorch's all_to_all_single with split
// sizes. The void* form takes offsets.
// Errors: InvalidArgument when a counts span does not have size() entries,
// or its sum is not its buffer's length:
//   "AllToAllV: send has 5 int64 elements and send_counts sum to 6; they
//   must be equal"
// and the void* form's errors (a pair of members whose counts differ fails
// every member alike).
template <typename T>
absl::Status Communicator::AllToAllV(absl::Span<const NoDeduce<T>> send,
                                     absl::Span<const size_t> send_counts,
                                     absl::Span<T> recv,
                                     absl::Span<const size_t> recv_counts) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  const size_t n = static_cast<size_t>(size());
  // Offsets as prefix sums; a sum that wraps is refused as unequal.
  std::vector<size_t> offsets[2];
  const absl::Span<const size_t> counts[2] = {send_counts, recv_counts};
  const size_t lengths[2] = {send.size(), recv.size()};
  const char* names[2] = {"send", "recv"};
  for (int k = 0; k < 2; ++k) {
    if (counts[k].size() != n) {
      return Rejected(
          CallKind::kAllToAllV, dtype,
          absl::InvalidArgumentError(absl::StrCat(
              "AllToAllV: ", names[k], "_counts has ", counts[k].size(),
              " entries for a group of ", n)));
    }
    size_t sum = 0;
    bool wrapped = false;
    offsets[k].reserve(n);
    for (size_t c : counts[k]) {
      offsets[k].push_back(sum);
      wrapped = wrapped || c > std::numeric_limits<size_t>::max() - sum;
      sum += c;
    }
    if (wrapped || sum != lengths[k]) {
      return Rejected(
          CallKind::kAllToAllV, dtype,
          absl::InvalidArgumentError(absl::StrCat(
              "AllToAllV: ", names[k], " has ", lengths[k], " ",
              DataTypeName(dtype), " elements and ", names[k],
              "_counts sum to ", wrapped ? "more than SIZE_MAX" : "",
              wrapped ? "" : absl::StrCat(sum), "; they must be equal")));
    }
  }
  return AllToAllV(send.data(), send_counts, offsets[0], recv.data(),
                   recv_counts, offsets[1], dtype);
}

// The asynchronous typed forms: the blocking typed form (with its length
// checks) queued on the progress thread (Communicator's I* calls).
template <typename T>
Work Communicator::IAllReduce(absl::Span<const NoDeduce<T>> send,
                              absl::Span<T> recv, ReduceOp op) {
  return Async([=] { return AllReduce<T>(send, recv, op); });
}
template <typename T>
Work Communicator::IAllReduce(absl::Span<T> buf, ReduceOp op) {
  return Async([=] { return AllReduce<T>(buf, op); });
}
template <typename T>
Work Communicator::IAllGather(absl::Span<const NoDeduce<T>> send,
                              absl::Span<T> recv) {
  return Async([=] { return AllGather<T>(send, recv); });
}
template <typename T>
Work Communicator::IReduceScatter(absl::Span<const NoDeduce<T>> send,
                                  absl::Span<T> recv, ReduceOp op) {
  return Async([=] { return ReduceScatter<T>(send, recv, op); });
}
template <typename T>
Work Communicator::IBroadcast(absl::Span<T> buf, int root) {
  return Async([=] { return Broadcast<T>(buf, root); });
}
template <typename T>
Work Communicator::IAllToAll(absl::Span<const NoDeduce<T>> send,
                             absl::Span<T> recv) {
  return Async([=] { return AllToAll<T>(send, recv); });
}

// A send or a receive of BatchSendRecv over a span.
template <typename T>
P2POp P2POp::Send(absl::Span<const T> buf, int peer) {
  return Send(buf.data(), buf.size(),
              typed_internal::DataTypeFor<std::remove_const_t<T>>(), peer);
}
template <typename T>
P2POp P2POp::Recv(absl::Span<T> buf, int peer) {
  return Recv(buf.data(), buf.size(), typed_internal::DataTypeFor<T>(), peer);
}

// Sends buf to group rank peer (which calls Recv with the same length).
template <typename T>
absl::Status Communicator::Send(absl::Span<const T> buf, int peer) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  return Send(buf.data(), buf.size(), dtype, peer);
}

template <typename T>
absl::Status Communicator::Send(absl::Span<T> buf, int peer) {
  return Send(absl::Span<const T>(buf), peer);
}

// Receives buf.size() elements from group rank peer.
template <typename T>
absl::Status Communicator::Recv(absl::Span<T> buf, int peer) {
  constexpr DataType dtype = typed_internal::DataTypeFor<T>();
  return Recv(buf.data(), buf.size(), dtype, peer);
}

}  // namespace devmesh

#endif  // DEVMESH_COMM_TYPED_COLLECTIVES_H_
